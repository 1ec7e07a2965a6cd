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

from echomq.core.model import Lease
from echomq.core.outcomes import Outcome, as_outcome

__all__ = ["DirectResult", "HandlerThreads"]

DirectResult = tuple[Lease, "Outcome | None", "BaseException | None"]
"""A direct run's lease, its outcome and the handler's exception (then no outcome)."""


class HandlerThreads:
    """One worker thread per slot for plain-function handlers.

    ``asyncio.to_thread`` costs ~35 µs of client CPU per call here and its default
    executor has only ``cpu_count + 4`` threads (6 on this machine, fewer than the
    slots). These threads take work from a C ``SimpleQueue`` and hand results back in
    batches: one ``call_soon_threadsafe`` wakes the loop for every result that landed
    meanwhile (~16 µs per call). A handler still has a thread of its own while it runs,
    so a blocking handler never delays another one or the heartbeats.

    Two kinds of work: :meth:`submit` (a future the caller's task awaits) and
    :meth:`run_direct` (no future and no task: the outcome goes to ``on_direct`` with
    every other direct result that landed meanwhile, one call per batch; the consumer's
    drain path, docs/decisions/0025-direct-runs.md).
    """

    def __init__(self, size: int, loop: asyncio.AbstractEventLoop,
                 on_direct: Callable[[list[DirectResult]], None] | None = None) -> None:
        self._loop = loop
        self._on_direct = on_direct
        self._todo: queue_mod.SimpleQueue[Any] = queue_mod.SimpleQueue()
        self._done: collections.deque[tuple[Any, Any, Any]] = collections.deque()
        # Direct leases no thread has taken yet, by id(lease): a thread and hold() each
        # pop one, and a dict's pop is atomic, so exactly one of them gets it.
        self._unstarted: dict[int, Lease] = {}
        self._threads = [threading.Thread(target=self._work, name=f"echomq-handler-{i}", daemon=True)
                         for i in range(size)]
        for t in self._threads:
            t.start()

    def submit(self, fn: Callable[[Lease], Any], lease: Lease) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = self._loop.create_future()
        self._todo.put((fut, fn, lease, contextvars.copy_context()))
        return fut

    def run_direct(self, fn: Callable[[Lease], Any], lease: Lease) -> None:
        """Run ``fn(lease)`` on a free thread; its outcome (``as_outcome`` of its return
        value, in the thread) reaches ``on_direct`` on the loop."""
        self._unstarted[id(lease)] = lease
        self._todo.put((None, fn, lease, contextvars.copy_context()))

    def hold(self, queue: str | None = None) -> list[Lease]:
        """Take back the direct leases no thread has started (the consumer is stopping):
        they will not run; the caller hands them back. With ``queue``, only that queue's
        (threads shared by a sharded queue's consumers, echomq.runtime.slot_pool)."""
        pending, back = self._unstarted, []
        for key in list(pending):
            if queue is not None and (mine := pending.get(key)) is not None \
                    and mine.queue != queue:
                continue
            lease = pending.pop(key, None)
            if lease is not None:
                back.append(lease)
        return back

    def _work(self) -> None:
        todo, done = self._todo, self._done
        while True:
            item = todo.get()
            if item is None:
                return
            fut, fn, lease, ctx = item
            if fut is None:  # a direct run: the outcome, not the bare return value
                if self._unstarted.pop(id(lease), None) is None:
                    continue  # taken back by hold(): it is handed back, not run
                try:
                    result, error = ctx.run(_outcome, fn, lease), None
                except BaseException as exc:  # the consumer logs it and fails the attempt
                    result, error = None, exc
            elif fut.done():  # its task was cancelled while it waited: nobody wants it
                continue
            else:
                try:
                    result, error = ctx.run(fn, lease), None
                except BaseException as exc:  # handed to the awaiting task, as to_thread would
                    result, error = None, exc
            done.append((fut if fut is not None else lease, result, error))
            if len(done) == 1:  # the loop drains everything queued, so one wake-up suffices
                with contextlib.suppress(RuntimeError):  # loop closed: nobody is waiting
                    self._loop.call_soon_threadsafe(self._deliver)

    def _deliver(self) -> None:
        done = self._done
        direct: list[DirectResult] = []
        while done:
            fut, result, error = done.popleft()
            if isinstance(fut, Lease):
                direct.append((fut, result, error))
            elif fut.done():  # cancelled: the lease was lost or the consumer stopped
                continue
            elif error is None:
                fut.set_result(result)
            else:
                fut.set_exception(error)
        if direct and self._on_direct is not None:
            self._on_direct(direct)

    def close(self) -> None:
        """Let the threads exit once their current handler returns."""
        for _ in self._threads:
            self._todo.put(None)


def _outcome(fn: Callable[[Lease], Any], lease: Lease) -> Outcome:
    return as_outcome(fn(lease))
