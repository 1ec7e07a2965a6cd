"""The consumer's lease table: which handler task holds which lease, and in what state.

A lease is *running* while its handler runs (heartbeats extend it), *finishing* once
the handler has answered and its outcome is being written (no heartbeat: the fenced
finish decides, and a heartbeat racing it must neither call the lease lost nor cancel
the write), and *lost* when a heartbeat found it gone (the handler is cancelled and its
outcome discarded: a worker that lost its lease never finishes the job).

A *direct* lease (:mod:`echomq.runtime.direct_runs`) has no task: its blocking handler runs
straight on a handler thread. It is kept by itself (its object's identity); the table
reports it with ``None`` for its task, and losing it only drops it (the thread cannot be
stopped; what it returns later is discarded because the lease is no longer here).

Two cancellation helpers of the runtime live here too: :func:`cancel_and_wait` (tasks
ended, a lost cancel repeated) and :func:`to_the_end` (cleanup that must finish, the
caller's cancellation delayed until then, never swallowed).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from echomq.core.model import Lease

__all__ = ["LeaseTable", "cancel_and_wait", "raise_lost_cancel", "to_the_end"]

log = logging.getLogger("echomq.runtime")
T = TypeVar("T")


class LeaseTable:
    """The leases one consumer holds, by the task running each."""

    def __init__(self) -> None:
        self._running: dict[asyncio.Task[None], Lease] = {}
        self._direct: dict[int, Lease] = {}  # by id(lease): no task
        self._lost: set[str] = set()
        self._finishing: set[str] = set()

    def __len__(self) -> int:
        return len(self._running) + len(self._direct)

    def __bool__(self) -> bool:
        return bool(self._running) or bool(self._direct)

    def add(self, task: asyncio.Task[None], lease: Lease) -> None:
        self._running[task] = lease

    def remove(self, task: asyncio.Task[None]) -> None:
        self._running.pop(task, None)

    def lease_of(self, task: asyncio.Task[None]) -> Lease | None:
        return self._running.get(task)

    def add_direct(self, lease: Lease) -> None:
        self._direct[id(lease)] = lease

    def holds_direct(self, lease: Lease) -> bool:
        """True while ``lease`` is ours (not lost, not given up at the end of a stop)."""
        return self._direct.get(id(lease)) is lease

    def end_direct(self, lease: Lease) -> None:
        """``lease`` is finished (or given up): out of the table and of the finishing set."""
        if self._direct.pop(id(lease), None) is lease:
            self._finishing.discard(lease.id)

    def take_direct(self) -> list[Lease]:
        """Every direct lease still held, removed from the table (the end of a stop)."""
        taken = list(self._direct.values())
        self._direct.clear()
        for lease in taken:
            self._finishing.discard(lease.id)
        return taken

    def start_finishing(self, lease: Lease) -> None:
        """A direct lease's outcome is being written: no heartbeat, the fence decides."""
        self._finishing.add(lease.id)

    def items(self) -> list[tuple[asyncio.Task[None], Lease]]:
        return list(self._running.items())

    def tasks(self) -> list[asyncio.Task[None]]:
        return list(self._running)

    def to_beat(self) -> list[tuple[asyncio.Task[None] | None, Lease]]:
        """The held leases that a heartbeat extends (not those being finished)."""
        busy = self._finishing
        beat: list[tuple[asyncio.Task[None] | None, Lease]] = [
            (t, x) for t, x in self._running.items() if x.id not in busy]
        beat += [(None, x) for x in self._direct.values() if x.id not in busy]
        return beat

    def lose(self, task: asyncio.Task[None] | None, lease: Lease) -> bool:
        """A heartbeat found ``lease`` gone: cancel its handler (True), unless the handler
        already ended or its outcome is being written (False: the fence decides). A
        direct lease is dropped: its handler's outcome will be discarded."""
        if task is None:
            if not self.holds_direct(lease) or lease.id in self._finishing:
                return False
            del self._direct[id(lease)]
            return True
        if task.done() or lease.id in self._finishing:
            return False
        self._lost.add(lease.id)
        task.cancel()
        return True

    def was_lost(self, lease: Lease) -> bool:
        """True once for a handler cancelled by :meth:`lose` (its outcome is discarded)."""
        if lease.id in self._lost:
            self._lost.discard(lease.id)
            return True
        return False

    @contextmanager
    def finishing(self, lease: Lease) -> Iterator[None]:
        """Mark ``lease`` as being finished for the duration of the write."""
        self._finishing.add(lease.id)
        try:
            yield
        finally:
            self._finishing.discard(lease.id)


def raise_lost_cancel() -> None:
    """Raise CancelledError if the current task was asked to cancel and the cancel was lost.

    Python 3.11's ``wait_for`` drops a cancel that races its inner call's completion, and
    redis-py wraps a write in one whenever a socket timeout is set: a run() cancelled during
    its first commands went on to start loops that only a stop or a cancel ends, and waited
    forever. The cancel is still counted on the task (``Task.cancelling``): call this after
    such commands, before starting work only a cancel would end.
    """
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


async def cancel_and_wait(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel ``tasks`` and wait until all have ended.

    A cancellation can be lost inside a library (on Python 3.11 one that races a
    completion inside ``wait_for``/``timeout`` is swallowed), so a task still running
    after a second is cancelled again rather than waited on forever.
    """
    pending = {t for t in tasks if not t.done()}
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=1.0)
    for task in tasks:
        if not task.cancelled():
            task.exception()  # retrieve it: an aux loop's failure was already logged


async def to_the_end(aw: Awaitable[T], *, what: str) -> T:
    """Await ``aw`` to its end even if the caller is cancelled meanwhile (a kill that must
    complete, children that must be down), then let that cancellation go on: it is delayed,
    never swallowed. Swallowing it (``suppress(CancelledError)`` around the wait) ended the
    caller's cancellation there: its task went on as if never asked to stop (and on Python
    3.11 its later ``asyncio.timeout`` raised CancelledError instead of TimeoutError).
    ``what`` names the work in the log line when it fails while the caller is cancelled."""
    task = asyncio.ensure_future(aw)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        if not task.cancelled() and task.exception() is not None:
            log.error("%s failed while its caller was cancelled", what, exc_info=task.exception())
        raise asyncio.CancelledError
    return task.result()
