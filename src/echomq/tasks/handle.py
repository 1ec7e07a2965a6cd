"""What an admission of a typed task returns: the job's id, its verdict, and its result.

``await handle.result(timeout=30)`` waits for the job to end (the queue's ``result``:
on its ``finished`` channel, never by polling) and decodes the task's return value to
the function's annotated return type. A dead job raises
:class:`~echomq.core.errors.JobFailed` (``.remote_type``, ``.remote_message``,
``.remote_traceback``: the exception the task raised), a cancelled one
:class:`~echomq.core.errors.JobCancelled`, a wait past ``timeout``
:class:`~echomq.core.errors.ResultTimeout`. :class:`SyncTaskHandle` is the blocking twin
(``task.admit_sync``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from echomq.client._async.queue import AsyncQueue
from echomq.client._sync.queue import Queue
from echomq.core.errors import InvalidPayload
from echomq.core.model import CancelOutcome, Verdict

__all__ = ["SyncTaskHandle", "TaskHandle"]

R = TypeVar("R")


def _decoded(decode: Callable[[bytes], Any], data: bytes, job_id: str) -> Any:
    try:
        return decode(data)
    except (ValueError, TypeError) as exc:  # msgspec's errors are ValueErrors
        raise InvalidPayload(f"the result of job {job_id} does not decode to the task's "
                             f"return type: {exc}") from None


def _name(verdict: Verdict | None) -> str:
    return "None" if verdict is None else verdict.name


class TaskHandle(Generic[R]):
    """One admitted job of a typed task (asyncio). ``verdict`` is None for a handle made
    from an id (``task.handle(id)``), not by an admission."""

    __slots__ = ("_decode", "id", "queue", "task_name", "verdict")

    def __init__(self, queue: AsyncQueue, job_id: str, verdict: Verdict | None, task_name: str,
                 decode: Callable[[bytes], Any]) -> None:
        self.queue, self.id, self.verdict, self.task_name = queue, job_id, verdict, task_name
        self._decode = decode

    async def result(self, *, timeout: float | None = 30.0) -> R:  # noqa: ASYNC109 (the API asks for timeout=)
        """The task's return value once the job ends (see the module)."""
        return _decoded(self._decode, await self.queue.result(self.id, timeout=timeout), self.id)  # type: ignore[no-any-return]

    async def cancel(self) -> CancelOutcome:
        """Ask the job to stop (``cancel``): waiting, it ends now; running, it is asked."""
        return (await self.queue.cancel([self.id]))[0]

    def __repr__(self) -> str:
        return f"TaskHandle({self.task_name}, id={self.id}, verdict={_name(self.verdict)})"


class SyncTaskHandle(Generic[R]):
    """One admitted job of a typed task (blocking)."""

    __slots__ = ("_decode", "id", "queue", "task_name", "verdict")

    def __init__(self, queue: Queue, job_id: str, verdict: Verdict | None, task_name: str,
                 decode: Callable[[bytes], Any]) -> None:
        self.queue, self.id, self.verdict, self.task_name = queue, job_id, verdict, task_name
        self._decode = decode

    def result(self, *, timeout: float | None = 30.0) -> R:
        """The task's return value once the job ends (blocks; see the module)."""
        return _decoded(self._decode, self.queue.result(self.id, timeout=timeout), self.id)  # type: ignore[no-any-return]

    def cancel(self) -> CancelOutcome:
        return self.queue.cancel([self.id])[0]

    def __repr__(self) -> str:
        return f"SyncTaskHandle({self.task_name}, id={self.id}, verdict={_name(self.verdict)})"
