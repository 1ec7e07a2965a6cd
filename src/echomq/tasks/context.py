"""What a running typed task may ask for: its attempt's context (:class:`TaskContext`).

A task receives it when one of its parameters is annotated ``TaskContext`` (any name,
any place); the parameter is not an argument of ``admit``::

    @app.task()
    async def resize(image_id: str, ctx: TaskContext) -> int:
        await ctx.progress(b"started")
        if ctx.cancel.is_set(): ...

It carries the lease (the job id, the attempt number: the fencing token, the lane), the
cancel token (set when the job is asked to stop; an ``async def`` task is also cancelled
outright) and the fenced progress report.
"""

from __future__ import annotations

import asyncio
from typing import Any

from echomq.client._async.queue import AsyncQueue
from echomq.core.model import CancelToken, Lease, ProgressOutcome

__all__ = ["TaskContext"]


class TaskContext:
    """One attempt of one typed task, as the worker runs it."""

    __slots__ = ("_loop", "lease", "queue", "task_name")

    def __init__(self, lease: Lease, queue: AsyncQueue, task_name: str,
                 loop: asyncio.AbstractEventLoop) -> None:
        self.lease, self.queue, self.task_name, self._loop = lease, queue, task_name, loop

    @property
    def id(self) -> str:
        return self.lease.id

    @property
    def attempt(self) -> int:
        """The attempt number (1 on the first run): the lease's fencing token."""
        return self.lease.attempt

    @property
    def lane(self) -> str | None:
        return self.lease.lane

    @property
    def cancel(self) -> CancelToken:
        """Set when the job is asked to stop (``cancel``): a plain-``def`` task polls it."""
        return self.lease.cancel

    async def progress(self, report: bytes | str) -> ProgressOutcome:
        """Record a progress report for this attempt (fenced: STALE if the attempt lost
        its lease, STOP when recorded and the job was asked to stop)."""
        data = report.encode() if isinstance(report, str) else report
        return await self.queue.report_progress(self.lease, data)

    def progress_sync(self, report: bytes | str) -> ProgressOutcome:
        """:meth:`progress` from a plain-``def`` task (its worker thread)."""
        future = asyncio.run_coroutine_threadsafe(self.progress(report), self._loop)
        result: Any = future.result()
        return result  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"TaskContext({self.task_name}, id={self.id}, attempt={self.attempt})"
