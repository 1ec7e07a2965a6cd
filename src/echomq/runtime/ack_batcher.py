"""The consumer's group commit of completions: an ack batcher.

Handlers that finish in the same loop turn share one flush: each completion is still its
own fenced ``complete`` (inside a ``complete_batch`` call) with its own verdict, awaited
by the handler's task. While the consumer's drain loop runs, it takes the batch into its
own flush (:meth:`AckBatcher.take`, with the claim and the peek: one round trip,
docs/decisions/0008-drain-path.md); otherwise the batcher flushes on its own. If a flush
fails, every waiter sees the error and retries on its own (a resent finish that had
landed reports STALE, never a second completion).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from echomq.core.model import Completion, Lease

if TYPE_CHECKING:
    from echomq.client._async.queue import AsyncQueue

__all__ = ["AckBatcher", "Pending", "Waiter"]


class Waiter(Protocol):
    """Who hears a completion's verdict: a task's future, or a direct run's callback
    object (:mod:`echomq.runtime.direct_runs`: no future, no task)."""

    def done(self) -> bool: ...
    def set_result(self, verdict: Completion, /) -> None: ...
    def set_exception(self, exc: BaseException, /) -> None: ...


Pending = tuple[Lease, bytes, Waiter]
"""One completion waiting for its flush: the lease, its result, who hears the verdict."""


class AckBatcher:
    """Completions of one consumer waiting for a flush, and the flushes it runs itself."""

    def __init__(self, queue: AsyncQueue, kick: asyncio.Event) -> None:
        self.queue = queue
        self._kick = kick  # the drain loop's wake-up: a completion is waiting for its flush
        self._waiting: list[Pending] = []
        self._flushers: set[asyncio.Task[None]] = set()
        self.pumping = False  # the drain loop takes the batches (True while it runs)

    def __len__(self) -> int:
        return len(self._waiting)

    async def complete(self, lease: Lease, result: bytes) -> Completion:
        """Queue one completion for the next flush and wait for its own verdict."""
        fut: asyncio.Future[Completion] = asyncio.get_running_loop().create_future()
        self._waiting.append((lease, result, fut))
        if self.pumping:
            self._kick.set()  # the drain loop sends it with its next flush
        elif len(self._waiting) == 1:
            self.flush_soon()
        return await fut

    def add(self, lease: Lease, result: bytes, waiter: Waiter) -> None:
        """Queue one completion whose verdict ``waiter`` hears (nothing awaits it)."""
        self._waiting.append((lease, result, waiter))
        if self.pumping:
            self._kick.set()
        elif len(self._waiting) == 1:
            self.flush_soon()

    def take(self) -> list[Pending]:
        """The waiting completions, handed to the caller's flush (then resolve or fail)."""
        batch, self._waiting = self._waiting, []
        return batch

    @staticmethod
    def resolve(batch: Sequence[Pending], verdicts: Sequence[Completion]) -> None:
        for (_, _, fut), verdict in zip(batch, verdicts, strict=True):
            if not fut.done():
                fut.set_result(verdict)

    @staticmethod
    def fail(batch: Sequence[Pending], exc: BaseException) -> None:
        for _, _, fut in batch:
            if not fut.done():
                fut.set_exception(exc)

    def flush_soon(self) -> None:
        """Flush the waiting completions in a task of their own (the drain loop is not
        running: before it starts, or after it stopped)."""
        task = asyncio.get_running_loop().create_task(self._flush())
        self._flushers.add(task)
        task.add_done_callback(self._flushers.discard)

    async def _flush(self) -> None:
        await asyncio.sleep(0)  # let the handlers that finish in this turn join the flush
        batch = self.take()
        try:
            done = await self.queue.complete_many([x[0] for x in batch], [x[1] for x in batch])
        except Exception as exc:
            self.fail(batch, exc)
            return
        self.resolve(batch, done)
