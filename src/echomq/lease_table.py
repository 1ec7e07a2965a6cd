"""The consumer's lease table: which handler task holds which lease, and in what state.

A lease is *running* while its handler runs (heartbeats extend it), *finishing* once
the handler has answered and its outcome is being written (no heartbeat: the fenced
finish decides, and a heartbeat racing it must neither call the lease lost nor cancel
the write), and *lost* when a heartbeat found it gone (the handler is cancelled and its
outcome discarded: a worker that lost its lease never finishes the job).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

from echomq.model import Lease

__all__ = ["LeaseTable", "cancel_and_wait"]


class LeaseTable:
    """The leases one consumer holds, by the task running each."""

    def __init__(self) -> None:
        self._running: dict[asyncio.Task[None], Lease] = {}
        self._lost: set[str] = set()
        self._finishing: set[str] = set()

    def __len__(self) -> int:
        return len(self._running)

    def __bool__(self) -> bool:
        return bool(self._running)

    def add(self, task: asyncio.Task[None], lease: Lease) -> None:
        self._running[task] = lease

    def remove(self, task: asyncio.Task[None]) -> None:
        self._running.pop(task, None)

    def items(self) -> list[tuple[asyncio.Task[None], Lease]]:
        return list(self._running.items())

    def tasks(self) -> list[asyncio.Task[None]]:
        return list(self._running)

    def to_beat(self) -> list[tuple[asyncio.Task[None], Lease]]:
        """The running leases that a heartbeat extends (not those being finished)."""
        return [(t, x) for t, x in self._running.items() if x.id not in self._finishing]

    def lose(self, task: asyncio.Task[None], lease: Lease) -> bool:
        """A heartbeat found ``lease`` gone: cancel its handler (True), unless the handler
        already ended or its outcome is being written (False: the fence decides)."""
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
