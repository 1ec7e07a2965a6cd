# Generated from tests/echomq/_async/support.py by scripts/unasync_gen.py. Do not edit.
"""Helpers of the API tests, written once for asyncio; the blocking copy is generated."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from echomq import generate


def jid() -> str:
    """A fresh job id."""
    return generate("JOB")


def wait_for(predicate: Callable[[], Any], within: float = 5.0) -> Any:
    """Poll a condition until it holds (never a bare sleep standing in for it); its value."""
    deadline = time.monotonic() + within
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.01)
