"""A consumer drains one queue with a handler (docs/architecture.md, "At-least-once, leased").

Its parts: :mod:`echomq.runtime.consumer_options` (what it is given and counts),
:mod:`echomq.runtime.drain_pump` (its drain loop, one flush per turn),
:mod:`echomq.runtime.lease_table` (the leases it holds), :mod:`echomq.runtime.task_runs` and
:mod:`echomq.runtime.direct_runs` (an attempt in a task of its own, or straight on a handler
thread), :mod:`echomq.runtime.ack_batcher` (its group commit of completions),
:mod:`echomq.runtime.upkeep_duty` (its share of the queue's upkeep).

It claims jobs, runs the handler, heartbeats every ``beat_ms`` while handlers run,
and finishes each job fenced by its ``(id, attempt)``. Delivery is at-least-once:
a crash stops the heartbeat, the lease (``lease_ms``, server clock) expires, and
``reap`` makes the job visible again. Handlers must be idempotent.

* A handler is an ``async def`` (run on the loop) or a plain function (run in a
  worker thread, so a handler that blocks on I/O never starves the heartbeats; one that
  holds the GIL, or must be stoppable at its timeout, runs in a child process with
  ``pool="process"``: :mod:`echomq.runtime.process_pool`). At most
  ``concurrency`` handlers run at once; with a deep backlog the consumer leases up to
  ``concurrency`` more ahead of them (docs/decisions/0025-direct-runs.md), claimed by a
  second flush sent before the first is answered, so the server runs one while the
  worker handles the other (docs/decisions/0052-two-flushes-in-flight.md). A plain
  function without hooks runs without a task per job (:mod:`echomq.runtime.direct_runs`), same guarantees.
* Handler answers: ``None`` or :class:`Ack` completes; :class:`Defer` retries later
  without counting a failure; :class:`Backoff` or an exception counts a failure and
  retries with the backoff policy (dead at the attempt limit, error kept).
* A heartbeat that finds the lease lost cancels the handler and discards its
  outcome: a worker that lost its lease never finishes the job.
* Idle, the consumer waits on the queue's wake channel (``SSUBSCRIBE``, read inline
  by :mod:`echomq.runtime.wake_link`, decision 0026), so a new job starts about one round trip
  after admission, not a poll later. With
  ``handoff`` (the default) it also parks on the server: the next admission into the
  empty queue leases the job to it in the same step and the wake message carries the
  lease, so the handler starts with no round trip in between (:mod:`echomq.runtime.parking`,
  docs/decisions/0018-hand-off.md). A handed-off job is an ordinary lease (heartbeat,
  fenced finish, reaped if the consumer dies); one may arrive while the consumer
  claims, so at most one job beyond ``concurrency`` runs.
* Every beat one consumer of the queue (a ``SET NX PX`` token) runs promote and
  reap, and now and then retention: no separate scheduler process
  (:mod:`echomq.runtime.upkeep_duty`).
* A server's refusal never ends it: every failure is classified
  (:mod:`echomq.client.replies`). Back-pressure (OOM, BUSY) and transient states (LOADING,
  READONLY, failover, lost connections, ...) are logged once per episode, backed off
  and retried, each episode counted in :attr:`stats`; a configuration error (NOPERM,
  WRONGPASS, NOAUTH, the version fence) stops it: :meth:`run` raises
  :class:`~echomq.core.errors.ConfigurationError` whose one line names the fix. No handler
  task's exception goes unobserved.
* At start it refuses a server whose ``maxmemory-policy`` could evict jobs
  (:mod:`echomq.core.eviction`), unless ``allow_eviction=True`` (then it warns).
* A queue recorded under another major protocol version (every script checks it) stops
  the consumer: :meth:`run` logs one error line and raises ProtocolVersionError (a
  ConfigurationError). Nothing
  is written before the first flush has passed the fence (maintenance waits for it).
* :meth:`stop` stops claiming, hands back at once the jobs leased ahead and not
  started, lets running handlers finish within the grace
  period, then cancels them and hands their jobs back at once (``defer`` with no
  delay, fenced by the attempt: pending again, no failure counted) instead of
  leaving them to a lease expiry. ``stop(hurry=True)`` ends the grace period now.
* Cancelling the task of :meth:`run` ends it without a grace period: its handlers are
  cancelled, nothing it leased and had not started runs after it ended (neither a lease
  held ahead nor one queued for a handler thread), and those jobs wait for their leases to
  expire (reap runs them again): nothing more is sent to a server that may be why.
* A handler's exception is logged with its traceback; the row keeps its type,
  message and a bounded traceback (:mod:`echomq.core.failures`).
* ``options.timeout_ms`` (or the job's own, given at admission): a handler running
  longer fails its attempt with
  :class:`~echomq.core.errors.HandlerTimeout` and its lease is given back at once (the fenced
  retry), not left to expire. ``hooks`` (:class:`~echomq.core.hooks.Hooks`) run before and
  after the handler, on its failure, and after the outcome is written.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import time

from echomq.client._async.queue import AsyncQueue
from echomq.client.replies import Episodes, Kind, classify
from echomq.core.errors import ConfigurationError, InvalidArgument, ProtocolVersionError
from echomq.core.eviction import check_eviction_policy
from echomq.core.hooks import Hooks
from echomq.core.model import Lease
from echomq.core.outcomes import Outcome
from echomq.protocol.sharding import RETIRED
from echomq.runtime._threads import HandlerThreads
from echomq.runtime.ack_batcher import AckBatcher
from echomq.runtime.consumer_options import ConsumerOptions, ConsumerStats, Handler
from echomq.runtime.direct_runs import DirectRuns
from echomq.runtime.drain_pump import DrainPump, wait
from echomq.runtime.finishing import hand_back, record_outcome
from echomq.runtime.handling import timeout_for
from echomq.runtime.lease_table import LeaseTable, cancel_and_wait, raise_lost_cancel
from echomq.runtime.parking import Parking
from echomq.runtime.process_pool import ProcessPool, pooled, resolve_handler
from echomq.runtime.slot_pool import SlotPool
from echomq.runtime.task_runs import TaskRuns
from echomq.runtime.upkeep_duty import UpkeepDuty
from echomq.runtime.wake_link import listen

__all__ = ["Consumer", "ConsumerOptions", "ConsumerStats", "Handler"]

log = logging.getLogger("echomq.runtime.consumer")


class Consumer:
    """Drain ``queue`` with ``handler``; run with ``await consumer.run()``."""

    def __init__(self, queue: AsyncQueue, handler: Handler | str, *,
                 options: ConsumerOptions | None = None, name: str | None = None,
                 hooks: Hooks | None = None, pool: SlotPool | None = None) -> None:
        self.queue = queue
        if hooks is not None and not isinstance(hooks, Hooks):
            raise InvalidArgument(f"hooks must be echomq.Hooks, not {type(hooks).__name__}")
        self.hooks = hooks or Hooks()
        self.options = options or ConsumerOptions()
        self.name = name or f"{queue.name}@{os.getpid()}"
        self.processes: ProcessPool | None = None  # pool="process": the children (decision 0035)
        if self.options.pool == "process":  # the parent keeps lease and beats; a child computes
            handler, self.processes = pooled(handler, size=self.options.concurrency, name=self.name,
                                        kill_grace_s=self.options.kill_grace_s,
                                        timeout_ms=self.options.timeout_ms)
        self.handler: Handler = resolve_handler(handler) if isinstance(handler, str) else handler
        # An object whose __call__ is ``async def`` counts as an async handler too.
        self._is_async = inspect.iscoroutinefunction(self.handler) or inspect.iscoroutinefunction(
            type(self.handler).__dict__.get("__call__"))
        self.stats = ConsumerStats()
        # One pool of concurrency: the consumer's own, or one shared by the consumers of a
        # sharded queue's shards (echomq.runtime.slot_pool; its size is ``concurrency``).
        self._pool = pool or SlotPool(self.options.concurrency)
        self._kick = self._pool.join(self)  # a finished handler, a free slot, a wake-up or stop
        self._leases = LeaseTable()
        self._acks = AckBatcher(queue, self._kick)
        self._parking = Parking(queue, lease_ms=self.options.lease_ms, beat_ms=self.options.beat_ms,
                                kick=self._kick)
        self._threads: HandlerThreads | None = None
        # A blocking handler without hooks runs its attempts without a task each (those
        # with a handler timeout keep theirs): docs/decisions/0025-direct-runs.md.
        self._direct = not self._is_async and not self.hooks
        self._tasks = TaskRuns(leases=self._leases, kick=self._kick, hooks=self.hooks,
                               handler=self.handler, is_async=self._is_async, options=self.options,
                               timeouts=self.processes is None,
                               name=self.name, finish=self._finish, failed=self._finish_failed,
                               slots=self._pool)
        self._runs = DirectRuns(leases=self._leases, acks=self._acks, stats=self.stats,
                                kick=self._kick, name=self.name, finish=self._finish,
                                failed=self._finish_failed)
        self._stopping = asyncio.Event()
        self._hurry = False
        self._closed = False
        self._episodes = Episodes(self.name, log)
        self._fenced = asyncio.Event()  # the first flush passed the version fence
        self._fatal: ConfigurationError | None = None
        self._pump = DrainPump(queue, self.options, member=self, pool=self._pool, kick=self._kick,
                               acks=self._acks, parking=self._parking, stopping=self._stopping,
                               episodes=self._episodes, fenced=self._fenced, start=self._start,
                               refused=self._refused, ride_out=self._ride_out)

    # ------------------------------------------------------------ public
    async def run(self) -> None:
        """Claim and run jobs until :meth:`stop`; then drain within the grace period.

        First it checks the server's eviction policy: UnsafeEvictionPolicy if it could
        silently drop jobs, unless ``options.allow_eviction`` (then a warning)."""
        await check_eviction_policy(self.queue.connector, allow=self.options.allow_eviction,
                                    who=self.name)
        await self._parking.prepare()
        raise_lost_cancel()  # a cancel a redis-py call dropped: not run (and listen) forever
        aux = [asyncio.create_task(self._heartbeats(), name=f"{self.name}:beat"),
               asyncio.create_task(self._listen(), name=f"{self.name}:wake")]
        if self.options.maintenance:
            aux.append(asyncio.create_task(self._maintain(), name=f"{self.name}:maint"))
        if not self._is_async:
            self._threads = self._pool.threads(asyncio.get_running_loop(), self.queue.name,
                                               self._runs.on_results)
            self._tasks.threads = self._threads
        try:
            self._acks.pumping = True
            try:
                await self._pump.run()
            finally:
                self._acks.pumping = False
                if self._acks:
                    self._acks.flush_soon()
            await self._parking.withdraw()
            self._start(self._parking.take())  # leased to us before the withdrawal: run them
            await self._drain()
        finally:
            # Before any await: nothing leased and not started runs from now on. A run()
            # cancelled (or failed) while it pumped skipped _drain, and each handler task
            # cancelled below frees a slot that would start the next lease held ahead: a
            # handler running after run() ended, without heartbeats, its job run again
            # once its lease expired. Those leases are left to expire (reap), not handed
            # back: a cancelled run() sends nothing more to a server that may be the reason.
            self._stopping.set()  # a hand-off heard from here on is not started either
            unrun = self._take_back_unstarted()
            if unrun:
                log.info("%s: ended before %d leased job(s) started; their leases will expire",
                         self.name, len(unrun))
            if self._threads is not None:
                self._pool.leave_threads(self.queue.name)
            self._closed = True  # the aux loops check it too: a cancel alone can be lost
            # One call: every task is cancelled before its first await, so a second cancel
            # of run() while it waits cannot leave a handler running without heartbeats.
            try:
                await cancel_and_wait(aux + self._leases.tasks() + self._runs.tasks())
            finally:  # the handler processes end even then
                if self.processes is not None:
                    await self.processes.aclose()
        if self._fatal is not None:
            raise self._fatal

    def stop(self, *, hurry: bool = False) -> None:
        """Stop claiming; :meth:`run` returns once running handlers are done, or at the end
        of the grace period (at once with ``hurry``) with the rest handed back."""
        self._hurry = self._hurry or hurry
        self._stopping.set()
        self._kick.set()

    @property
    def in_flight(self) -> int:
        return len(self._leases)

    def held(self) -> int:
        """The leases that count against the pool: held, less those finished and waiting
        for their flush or in one."""
        return len(self._leases) - len(self._acks) - self._pump.acked_in_flight

    # ------------------------------------------------------------ loops
    def _start(self, leases: list[Lease], *, claimed: bool = False) -> None:
        """Run leased jobs: claimed ones, or handed off by an admission (counted in both)."""
        self.stats.claimed += len(leases)
        if not claimed:
            self.stats.handed_off += len(leases)
        threads, default_ms = self._threads, self.options.timeout_ms
        for lease in leases:
            if self._direct and threads is not None and timeout_for(lease, default_ms) is None:
                self._leases.add_direct(lease)
                threads.run_direct(self.handler, lease)
                continue
            self._tasks.start(lease)

    def _refused(self, exc: BaseException, where: str) -> float | None:
        """Classify a failure: the back-off for a retryable one, else None. A configuration
        error stops the consumer (``run`` raises it, one line naming the fix)."""
        refusal = classify(exc)
        if refusal.kind.retry:
            self.stats.errors += 1
            delay = self._episodes.refused(refusal, where)
            self.stats.episodes = self._episodes.episodes
            self.stats.refusals = dict(self._episodes.by_code)
            return delay
        if refusal.kind is Kind.CONFIGURATION and self._fatal is None:
            if isinstance(exc, ProtocolVersionError):  # the typed error itself, touching nothing
                self._fatal = exc
                # A shard retired by an online reshard (decision 0032) is expected: the
                # sharded consumer moves to the new layout.
                (log.info if RETIRED in str(exc) else log.error)(
                    "consumer %s stopped: %s (%s)", self.name, exc, refusal.detail)
            else:
                self._fatal = ConfigurationError(f"consumer {self.name} stopped: {refusal.line()}")
                self._fatal.__cause__ = exc
                log.error("%s", self._fatal)
            self.stop()
        return None

    async def _ride_out(self, exc: BaseException, where: str) -> bool:
        """Back off after a retryable failure (True), or tell the caller to give up (False)."""
        delay = self._refused(exc, where)
        if delay is None:
            return self._fatal is not None  # stopping: the loop ends on its own
        await wait(self._stopping, delay)
        return True

    def _take_back_unstarted(self) -> list[Lease]:
        """Out of the table, never to run here: the direct leases no handler thread has
        started, the leases held ahead waiting for a slot, the hand-offs not started."""
        unrun = self._threads.hold(self.queue.name) if self._threads is not None else []
        for lease in unrun:
            self._leases.end_direct(lease)
        return unrun + self._tasks.take_back_unstarted() + self._parking.take()

    async def _drain(self) -> None:
        unstarted = self._take_back_unstarted()
        if unstarted:
            await self._hand_back(unstarted)
        deadline = time.monotonic() + self.options.grace_s
        while self._leases and not self._hurry and time.monotonic() < deadline:
            self._kick.clear()  # set by every finished handler and by stop(hurry=True)
            await wait(self._kick, deadline - time.monotonic())
        late = self._leases.items()
        for task, _ in late:
            task.cancel()
        await asyncio.gather(*(t for t, _ in late), return_exceptions=True)
        given_up = self._leases.take_direct()  # still running: their outcomes are discarded
        await cancel_and_wait(self._runs.tasks())  # finishes still retrying: handed back now
        # Hand-offs that arrived after the withdrawal never started: back to pending too.
        await self._hand_back([lease for _, lease in late] + given_up + self._parking.take())

    async def _hand_back(self, leases: list[Lease]) -> None:
        await hand_back(self.queue, self.stats, leases, name=self.name)

    def _finish_failed(self, exc: BaseException, lease: Lease) -> None:
        self._refused(exc, f"the finish of {lease.id}")  # a configuration error stops
        if self._fatal is None:
            log.error("%s: could not record the outcome of %s; its lease will expire",
                      self.name, lease.id, exc_info=exc)

    async def _finish(self, lease: Lease, outcome: Outcome) -> None:
        await record_outcome(self.queue, self._acks, self.stats, lease, outcome,
                             lease_ms=self.options.lease_ms, backoff=self.options.backoff,
                             name=self.name,
                             stopped=lambda: self._fatal is not None)

    async def _heartbeats(self) -> None:
        o = self.options
        while not self._closed:
            await asyncio.sleep(o.beat_ms / 1000)
            running = self._leases.to_beat()
            if not running:
                continue
            try:
                deadlines = await self.queue.heartbeat_many([x for _, x in running],
                                                            lease_ms=o.lease_ms)
            except Exception as exc:
                if self._refused(exc, "a heartbeat") is None and self._fatal is None:
                    log.error("%s: heartbeat failed", self.name, exc_info=exc)
                continue
            for (task, lease), deadline in zip(running, deadlines, strict=True):
                if deadline is None and self._leases.lose(task, lease):
                    self.stats.lost += 1
                elif deadline is not None and deadline.cancel and not lease.cancel.is_set():
                    # Asked to stop (decision 0023): the token tells a blocking handler; an
                    # async one is cancelled. Its attempt's finish ends the job cancelled.
                    lease.cancel.set()
                    if task is not None:
                        self._tasks.ask_to_stop(task)

    async def _maintain(self) -> None:
        duty = UpkeepDuty(self.queue, self.options, self.stats, self.name,
                          token=f"{self.name}:{id(self)}")
        await self._fenced.wait()  # no maintenance token on a queue of another version
        while not self._closed:
            await asyncio.sleep(self.options.beat_ms / 1000)
            try:
                await duty.beat()
            except Exception as exc:
                if self._refused(exc, "maintenance") is None and self._fatal is None:
                    log.error("%s: maintenance failed", self.name, exc_info=exc)

    async def _listen(self) -> None:
        """Hear the queue's wake channel (:mod:`echomq.runtime.wake_link`), subscribing again after
        a drop; the consumer parks only while the subscription is confirmed."""
        await listen(self.queue, self._heard, on_lost=self._deaf, closed=lambda: self._closed,
                     on_ready=lambda: self._parking.ready(parks=self.options.handoff))

    def _heard(self, data: bytes) -> None:
        """One wake message, in the loop step that read it: a hand-off to us starts its
        handler now (no flush competes with its start: parked again by the flush of its
        finish, or soon after); a new job's id wakes the drain loop to claim it."""
        mine = self._parking.message(data)
        if mine is False:
            return  # another consumer's hand-off: pending is still empty
        if mine and not self._stopping.is_set():  # (stopping: _drain hands it back instead)
            self._parking.repark_soon()
            self._start(self._parking.take())  # last: the loop then blocks, the handler runs
            return
        hints = self._pump.hints
        if mine is None and data.startswith(b"JOB") and len(hints) < 64:
            hints.append(data)
        self._kick.set()

    async def _deaf(self, exc: BaseException) -> None:
        if not self._closed:
            self.stats.errors += 1
            log.debug("%s: wake channel lost (%r)", self.name, exc)
        await self._parking.deaf(within_s=1.0)  # no hand-off to a consumer that cannot hear
