"""Group commit: callers that arrive together share one flush (one transaction, one round trip).

:class:`GroupCommit` takes one item per call and hands back that item's own result. Items
that arrive while a flush is in flight wait and go out together in the next one, so under
load a flush carries many items and at rest it carries one, with no timer in between (no
added latency). At most ``flushes`` run at once, each of at most ``max_items``.

A flush runs in a task of its own: a caller cancelled while it waits does not cancel the
flush its item is in (the others in it still get their answers; its own effect may still
happen, like a request whose reply is lost). An exception raised by the flush function
is every waiting caller's exception. The flush function returns one result per item, in
the items' order, and runs in the context (``contextvars``) of its batch's first caller.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

__all__ = ["GroupCommit"]

I = TypeVar("I")  # noqa: E741 (an item)
R = TypeVar("R")


class GroupCommit(Generic[I, R]):
    """``flush(items) -> results`` run for items gathered from concurrent :meth:`call`\\ s."""

    def __init__(self, flush: Callable[[list[I]], Awaitable[Sequence[R]]], *,
                 max_items: int = 256, flushes: int = 2) -> None:
        if max_items < 1 or flushes < 1:
            raise ValueError("max_items and flushes must be >= 1")
        self._flush = flush
        self.max_items = max_items
        self.flushes = flushes
        self._waiting: list[tuple[I, asyncio.Future[R], contextvars.Context]] = []
        self._running: set[asyncio.Task[None]] = set()
        self.batches = 0  # flushes run (a figure for benches and tests)
        self.items = 0

    async def call(self, item: I) -> R:
        """``item``'s result from the flush that carried it."""
        fut: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        fut.add_done_callback(_observed)  # a caller cancelled meanwhile never reads it
        self._waiting.append((item, fut, contextvars.copy_context()))
        if len(self._running) < self.flushes:
            self._running.add(asyncio.create_task(self._drain()))
        # No shield needed: ``fut`` is this caller's alone, so a cancel cancels only it (the
        # flush skips a done future), and a shield costs a second future and a callback per call.
        return await fut

    async def _run(self, items: list[I]) -> Sequence[R]:
        return await self._flush(items)

    async def _drain(self) -> None:
        try:
            await self._drain_waiting()
        finally:
            # Out of _running the moment it sees nothing waiting, with no await in between: a
            # done-callback would run a loop turn later, and a call() arriving in that turn
            # would find every slot taken and start no drain, its item left until another call.
            task = asyncio.current_task()
            if task is not None:
                self._running.discard(task)

    async def _drain_waiting(self) -> None:
        while self._waiting:
            batch = self._waiting[: self.max_items]
            del self._waiting[: self.max_items]
            self.batches += 1
            self.items += len(batch)
            try:
                # The flush runs in the context of its first caller (its wallet deadline and
                # retry policy, the earliest of the batch), not in the one the drain began in.
                results = await asyncio.create_task(self._run([item for item, _, _ in batch]),
                                                    context=batch[0][2])
                if len(results) != len(batch):
                    raise RuntimeError(f"a flush of {len(batch)} items returned {len(results)} results")
            except BaseException as exc:
                for _, fut, _ in batch:
                    if not fut.done():
                        fut.set_exception(exc)
                if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt | SystemExit):
                    raise
                continue
            for (_, fut, _), result in zip(batch, results, strict=True):
                if not fut.done():
                    fut.set_result(result)


def _observed(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()
