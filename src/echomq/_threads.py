"""Worker threads for plain-function (blocking) handlers of a consumer."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import queue as queue_mod
import threading
from collections.abc import Callable
from typing import Any

from echomq.model import Lease

__all__ = ["HandlerThreads"]


class HandlerThreads:
    """One worker thread per slot for plain-function handlers.

    ``asyncio.to_thread`` costs ~35 µs of client CPU per call here and its default
    executor has only ``cpu_count + 4`` threads (6 on this machine, fewer than the
    slots). These threads take work from a C ``SimpleQueue`` and hand results back in
    batches: one ``call_soon_threadsafe`` wakes the loop for every result that landed
    meanwhile (~16 µs per call). A handler still has a thread of its own while it runs,
    so a blocking handler never delays another one or the heartbeats.
    """

    def __init__(self, size: int, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._todo: queue_mod.SimpleQueue[Any] = queue_mod.SimpleQueue()
        self._done: collections.deque[tuple[asyncio.Future[Any], Any, BaseException | None]] = (
            collections.deque())
        self._threads = [threading.Thread(target=self._work, name=f"echomq-handler-{i}", daemon=True)
                         for i in range(size)]
        for t in self._threads:
            t.start()

    def submit(self, fn: Callable[[Lease], Any], lease: Lease) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = self._loop.create_future()
        self._todo.put((fut, fn, lease, contextvars.copy_context()))
        return fut

    def _work(self) -> None:
        todo, done = self._todo, self._done
        while True:
            item = todo.get()
            if item is None:
                return
            fut, fn, lease, ctx = item
            try:
                result, error = ctx.run(fn, lease), None
            except BaseException as exc:  # handed to the awaiting task, as to_thread would
                result, error = None, exc
            done.append((fut, result, error))
            if len(done) == 1:  # the loop drains everything queued, so one wake-up suffices
                with contextlib.suppress(RuntimeError):  # loop closed: nobody is waiting
                    self._loop.call_soon_threadsafe(self._deliver)

    def _deliver(self) -> None:
        done = self._done
        while done:
            fut, result, error = done.popleft()
            if fut.done():  # cancelled: the lease was lost or the consumer stopped
                continue
            if error is None:
                fut.set_result(result)
            else:
                fut.set_exception(error)

    def close(self) -> None:
        """Let the threads exit once their current handler returns."""
        for _ in self._threads:
            self._todo.put(None)
