"""Running a typed-task app's worker inside a test (the same Worker ``echomq worker`` runs)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from echomq import App
from echomq.ops.worker import Worker, settings_for


@contextlib.asynccontextmanager
async def running(app: App, conn: Any, **overrides: Any) -> AsyncIterator[Worker]:
    """``app``'s worker on ``conn`` while the block runs; stopped (and awaited) after."""
    overrides.setdefault("beat_ms", 50)
    overrides.setdefault("lease_ms", 2000)
    worker = Worker(settings_for(app, **overrides), connector=conn)
    run = asyncio.create_task(worker.run())
    try:
        yield worker
    finally:
        worker.stop()
        await run
