"""Waiting for a condition with a bound: poll it, never sleep in its place; and a step
repeated until a flag says stop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

__all__ = ["repeat_until", "wait_for"]


async def wait_for(check: Callable[[], Awaitable[bool]], *, timeout_s: float, every_s: float = 0.05,
                   what: str = "condition") -> None:
    """Poll ``check`` until it is true; TimeoutError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s}s waiting for {what}")
        await asyncio.sleep(every_s)


async def repeat_until(stop: asyncio.Event, step: Callable[[], Awaitable[None]], *, every_s: float) -> None:
    """Run ``step`` every ``every_s`` seconds until ``stop`` is set.

    Stop it with ``stop.set()`` (a ``cancel()`` of its task as well only makes it quicker):
    the loop ends by the flag, never by a cancellation alone. On Python 3.11 a cancellation
    that arrives while a pooled-connection checkout is being served is swallowed
    (psycopg_pool waits with ``asyncio.wait_for``, which returns the connection then), so a
    loop that only a ``cancel()`` ends would go on, and whoever awaits it would wait forever
    (``codemojex play`` hung so after a PostgreSQL restart: its progress bars).
    """
    while not stop.is_set():
        await step()
        if not stop.is_set():
            await asyncio.sleep(every_s)
