"""Handlers and settings that ``echomq worker`` loads in the tests (``tests.echomq.worker_targets:...``)."""

from __future__ import annotations

import asyncio
import os
from typing import ClassVar

from echomq import Lease
from echomq.ops.worker import WorkerSettings


async def ok(lease: Lease) -> None:
    """Completes every job."""


async def slow(lease: Lease) -> None:
    """Runs until cancelled: every job it holds is in flight at shutdown."""
    await asyncio.sleep(3600)


def boom(lease: Lease) -> None:
    """Fails every job (a blocking handler, so it runs in a thread)."""
    raise RuntimeError(f"boom on {lease.id}")


class Settings:
    """An arq-style settings class: its attributes are the fields."""

    handlers: ClassVar = {os.environ.get("WORKER_TEST_QUEUE", "unused"): ok}
    concurrency = 4
    burst = True


settings = WorkerSettings(handlers={os.environ.get("WORKER_TEST_QUEUE", "unused"): ok}, burst=True)
