"""Waiting for a condition with a bound: poll it, never sleep in its place."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

__all__ = ["wait_for"]


async def wait_for(check: Callable[[], Awaitable[bool]], *, timeout_s: float, every_s: float = 0.05,
                   what: str = "condition") -> None:
    """Poll ``check`` until it is true; TimeoutError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s}s waiting for {what}")
        await asyncio.sleep(every_s)
