"""Task runs: each attempt in a task of its own (:class:`echomq.runtime.consumer.Consumer`).

The path of an ``async def`` handler, of any handler with hooks, and of an attempt with a
handler timeout (the rest, a blocking handler's plain attempts, are
:mod:`echomq.runtime.direct_runs`). The task waits for one of ``concurrency`` slots (a lease taken
ahead of the running handlers waits here, decision 0025), runs the handler within its
timeout with the hooks around it (:mod:`echomq.runtime.handling`), then writes the outcome fenced
by its attempt (the consumer's ``finish``). A heartbeat that finds the lease lost cancels
the task and its outcome is discarded; one that finds the job asked to stop cancels an
``async def`` handler and the attempt's finish ends the job cancelled (decision 0023).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Awaitable, Callable

from echomq.core.hooks import Hooks
from echomq.core.model import Lease
from echomq.core.outcomes import Outcome, as_outcome
from echomq.runtime._threads import HandlerThreads
from echomq.runtime.consumer_options import ConsumerOptions, Handler
from echomq.runtime.handling import call_handler, timeout_for
from echomq.runtime.lease_table import LeaseTable
from echomq.runtime.slot_pool import SlotPool

__all__ = ["TaskRuns"]

log = logging.getLogger("echomq.runtime.consumer")


class TaskRuns:
    """The consumer's attempts that run in tasks of their own (see the module)."""

    def __init__(self, *, leases: LeaseTable, kick: asyncio.Event, hooks: Hooks,
                 handler: Handler, is_async: bool, options: ConsumerOptions, name: str,
                 timeouts: bool = True,
                 finish: Callable[[Lease, Outcome], Awaitable[None]],
                 failed: Callable[[BaseException, Lease], None],
                 slots: SlotPool | None = None) -> None:
        self._leases, self._kick, self._hooks = leases, kick, hooks
        self._handler, self._is_async, self._options, self._name = handler, is_async, options, name
        self._finish, self._failed = finish, failed
        # False: the handler keeps the attempt's timeout itself (the process pool, which
        # starts the clock once a child holds the job, not while one starts).
        self._timeouts = timeouts
        self.threads: HandlerThreads | None = None  # a blocking handler's, set by run()
        # Handlers running at once: at most ``concurrency`` (the slots of a pool shared with
        # the consumers of the other shards, echomq.runtime.slot_pool). A lease taken ahead
        # waits in ``_ahead`` (held in the table without a task, so heartbeats extend it
        # and a lost one is dropped) until a slot frees: no task and no waiter per lease.
        self._slots = slots or SlotPool(options.concurrency)
        self._slotted: set[asyncio.Task[None]] = set()  # tasks holding a slot
        self._ahead: collections.deque[Lease] = collections.deque()
        self._asked: set[str] = set()  # jobs asked to stop whose async handler was cancelled

    def start(self, lease: Lease) -> None:
        if not self._ahead and self._slots.acquire():
            self._spawn(lease)
        else:
            self._leases.add_direct(lease)  # held, no task yet
            self._ahead.append(lease)
            self._slots.wait(self)

    def run_next(self) -> bool:
        """A slot is free (the pool asks): take it for the next lease waiting here (True),
        or answer False when none is left (lost, or taken back at stop)."""
        while self._ahead:
            lease = self._ahead.popleft()
            if self._leases.holds_direct(lease):  # not lost meanwhile, not given up at stop
                self._leases.end_direct(lease)
                self._slots.free -= 1
                self._spawn(lease)
                return True
        return False

    def _spawn(self, lease: Lease) -> None:
        task = asyncio.create_task(self._run_one(lease), name=f"{self._name}:{lease.id}")
        self._leases.add(task, lease)
        self._slotted.add(task)
        task.add_done_callback(self._done)

    def _release(self, task: asyncio.Task[None]) -> None:
        """``task``'s handler is done (or it never ran): its slot goes to the next lease."""
        if task not in self._slotted:
            return
        self._slotted.discard(task)
        self._slots.release()  # to the next lease waiting here or on another shard

    def ask_to_stop(self, task: asyncio.Task[None]) -> None:
        """The job was asked to stop: an ``async def`` handler is cancelled (its attempt's
        finish ends the job cancelled); a blocking one reads its lease's token."""
        lease = self._leases.lease_of(task)
        if lease is not None and self._is_async and not task.done():
            self._asked.add(lease.id)
            task.cancel()

    def take_back_unstarted(self) -> list[Lease]:
        """At stop: the leases still waiting for a slot, out of the table (not run)."""
        back = [x for x in self._ahead if self._leases.holds_direct(x)]
        self._ahead.clear()
        for lease in back:
            self._leases.end_direct(lease)
        return back

    def _done(self, task: asyncio.Task[None]) -> None:
        self._leases.remove(task)
        self._release(task)
        self._kick.set()
        if not task.cancelled() and task.exception() is not None:  # observed, never lost
            log.error("%s: %s ended with an error", self._name, task.get_name(),
                      exc_info=task.exception())

    async def _run_one(self, lease: Lease) -> None:
        me: asyncio.Task[None] = asyncio.current_task()  # type: ignore[assignment]
        try:
            try:  # a slot is ours (start/_release): never more than ``concurrency`` at once
                outcome = await call_handler(lambda: self._call(lease), lease, hooks=self._hooks,
                                             timeout_ms=timeout_for(lease, self._options.timeout_ms)
                                             if self._timeouts else None,
                                             who=self._name)
            finally:
                self._release(me)  # the handler is done: its slot goes to the next lease
        except asyncio.CancelledError:
            if self._leases.was_lost(lease):
                return  # lease lost: the outcome is discarded, the job runs elsewhere
            if lease.id not in self._asked:
                raise
            self._asked.discard(lease.id)
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()  # our own cancel, handled: the finish below must run
            outcome = None  # asked to stop: any finish of the attempt ends the job cancelled
        # From here the fenced finish decides; a heartbeat racing it must not call the
        # lease lost (complete may already have cleared it) nor cancel the write.
        with self._leases.finishing(lease):
            try:
                began = time.time()
                await self._finish(lease, outcome)
                await self._hooks.run_finished(lease, outcome, began, time.time())
            except Exception as exc:
                self._failed(exc, lease)
        # Out of the table now, not a loop turn later in the done callback: the drain loop's
        # next flush counts this slot free (its claim fills it).
        self._leases.remove(me)

    async def _call(self, lease: Lease) -> Outcome:
        if self._is_async:
            return as_outcome(await self._handler(lease))  # type: ignore[misc]
        # A blocking handler runs in a worker thread so heartbeats keep going. If its lease
        # is lost (or its timeout passes) the thread cannot be stopped; its outcome is discarded.
        assert self.threads is not None
        return as_outcome(await self.threads.submit(self._handler, lease))
