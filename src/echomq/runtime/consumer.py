"""A consumer drains one queue with a handler (docs/architecture.md, "At-least-once, leased").

Its parts: :mod:`echomq.runtime.consumer_options` (what it is given and counts),
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
import collections
import contextlib
import inspect
import logging
import os
import time
from typing import Any

from echomq.client._async.queue import AsyncQueue
from echomq.client.replies import Episodes, Kind, classify
from echomq.core.errors import ConfigurationError, InvalidArgument, ProtocolVersionError
from echomq.core.eviction import check_eviction_policy
from echomq.core.hooks import Hooks
from echomq.core.model import Completion, Lease
from echomq.core.outcomes import Outcome
from echomq.protocol.gate import Claimed
from echomq.protocol.sharding import RETIRED
from echomq.runtime._threads import HandlerThreads
from echomq.runtime.ack_batcher import AckBatcher, Pending
from echomq.runtime.consumer_options import ConsumerOptions, ConsumerStats, Handler
from echomq.runtime.direct_runs import DirectRuns
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

class _Flight:
    """One drain flush sent and not yet taken: its completions, its claim's count and the
    candidates it was given (``tried``)."""

    __slots__ = ("acks", "count", "leases", "task", "tried")

    def __init__(self, acks: list[Pending], count: int, tried: list[bytes] | None) -> None:
        self.acks, self.count, self.tried = acks, count, tried
        self.task: asyncio.Future[tuple[list[Completion], Claimed, list[bytes]]]
        self.leases = Claimed([])


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
        self._hints: list[bytes] = []  # ids told by the wake channel: claim candidates
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
        self._acked_in_flight = 0  # finished leases whose completions are in a flush in flight

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
                await self._pump()
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
        return len(self._leases) - len(self._acks) - self._acked_in_flight

    # ------------------------------------------------------------ loops
    async def _pump(self) -> None:
        """The drain loop: one flush per turn completes the finished jobs, claims as many
        jobs as there are free slots (from ids peeked by an earlier flush) and peeks the
        next candidates (docs/decisions/0008-drain-path.md). While the backlog is deep a
        second flush goes out before the first is answered (decision 0052), so the server
        runs one flush while this process reads the other's replies and runs its jobs."""
        flights: collections.deque[_Flight] = collections.deque()
        try:
            await self._pump_turns(flights)
        except BaseException:
            # Cancelled, or stopped by a failure: the flushes still in flight are cancelled
            # like the one a cancelled flush-per-turn loop awaited; what they leased
            # expires (reap), their completions are not awaited (see run()).
            for f in flights:
                f.task.cancel()
                self._pool.claiming -= f.count
                self._acked_in_flight -= len(f.acks)
            await asyncio.gather(*(f.task for f in flights), return_exceptions=True)
            raise

    async def _pump_turns(self, flights: collections.deque[_Flight]) -> None:
        o, q = self.options, self.queue
        window = 2 * o.concurrency + 16  # room to skip jobs of busy serial lanes
        ahead = o.concurrency  # leases held beyond the running handlers while the backlog is deep
        # A second flush is sent before the first is answered only with this many jobs to
        # finish or claim: smaller ones cost the server more per job than the wait saves.
        enough = max(1, o.concurrency // 2)
        cands: list[bytes] = []
        fresh = False  # cands came from the last flush (empty and fresh: pending was empty)
        held_until = 0.0  # the claim gate held jobs back until then (loop clock): no claims
        while True:
            if flights and (flights[0].task.done() or len(flights) > 1 or self._stopping.is_set()):
                # The oldest flush is answered (or two are in flight, or we stop): take it.
                f = flights.popleft()
                got = await self._land(f)
                if got is None:  # failed, backed off: what the flush had told is stale
                    cands, fresh = [], False
                    continue
                cands, fresh = got, True
                leases = f.leases
                if f.count and (leases.paused or (leases.wait_ms is not None
                                                  and len(leases) < f.count)):
                    # The claim gate held jobs back (docs/decisions/0022): wait until the
                    # next token is due, or a beat while paused (resume wakes us), never spin.
                    wait_s = o.beat_ms / 1000 if leases.paused else (leases.wait_ms or 0) / 1000
                    held_until = asyncio.get_running_loop().time() + wait_s
                elif f.tried is not None and not leases and cands == f.tried and not flights:
                    # Nothing claimable moved (e.g. every candidate waits on a busy serial
                    # lane): idle until a job finishes, a wake-up or the beat, as a poll
                    # would. The kick was cleared before the flush, so a finish or a wake-up
                    # that came while it was in flight is not lost.
                    if self._hints:  # a new job's id heard meanwhile (maybe past the peek)
                        cands, self._hints = [*self._hints[-o.concurrency:], *cands], []
                    else:
                        await self._wait(self._kick, o.beat_ms / 1000)
                    fresh = False
                await asyncio.sleep(0)  # let the acked tasks finish (their slots free up)
                continue
            if self._stopping.is_set():
                break
            self._start(self._parking.take())
            deep = len(cands) >= window  # a full peek: lease ahead of the slots
            free = self._pool.room(self, ahead=ahead if deep else 0)
            if deep:  # the room ahead goes to a second flush in flight, not a larger first
                free = min(free, o.concurrency)
            if free <= 0 and (cands or self._hints):
                self._pool.starve(self, self._kick)  # work and no room: a freed slot wakes us
            else:
                self._pool.fed(self)
            hold = held_until - asyncio.get_running_loop().time()
            if flights:
                # One flush in flight: send the next now only while the backlog is deep and
                # it carries enough; else wait for its answer or for more finished jobs.
                count = max(free, 0) if cands and hold <= 0 else 0
                if not (deep and len(self._acks) + count >= enough):
                    self._kick.clear()
                    if not flights[0].task.done():
                        await self._wait(self._kick, o.beat_ms / 1000)
                    continue
            elif not self._acks and (free <= 0 or (fresh and not cands) or hold > 0):
                if self._hints and free > 0:  # told of a new job during the last flush:
                    held_until, fresh = 0.0, False  # claim it now, not after a beat
                    cands, self._hints = cands or self._hints[-o.concurrency:], []
                    continue
                self._kick.clear()  # before parking: a kick during its round trip is kept
                if (free > 0 and hold <= 0 and o.handoff and self._parking.hearing
                        and not await self._parking.park(self._refused)):
                    fresh = False  # pending has work after all: claim it
                    continue
                await self._wait(self._kick, min(o.beat_ms / 1000, hold) if hold > 0
                                 else o.beat_ms / 1000)
                fresh = False  # woken or polled: look at pending again
                if self._stopping.is_set():
                    break
                if self._hints:
                    held_until = 0.0  # a wake-up (a resume, a new job): look again now
                if self._hints and not cands:
                    # Woken with the new job's id: claim it in the same flush as the peek,
                    # one round trip from the wake-up to the lease (the script re-checks it).
                    cands, self._hints = self._hints[-o.concurrency:], []
                else:
                    await asyncio.sleep(0)  # let handlers finishing in this turn join the flush
                continue
            self._kick.clear()  # what happens from here on wakes the next idle wait
            count = max(free, 0) if cands and hold <= 0 else 0
            # Nothing to claim and a slot free: park in this flush (it parks only if pending
            # is empty), so going idle costs no round trip of its own (decision 0018).
            park = (not flights and o.handoff and self._parking.hearing and not cands
                    and free > 0 and not self._parking.recent())
            f = _Flight(self._acks.take(), count, cands if count else None)
            self._pool.claiming += count  # room spent while the claim is in flight
            self._acked_in_flight += len(f.acks)  # finished: no longer held against the room
            finished = [(x, r) for x, r, _ in f.acks]
            if park:  # (a parking flush claims nothing: it is sent only without candidates)
                heard = self._parking.heard

                async def parking(finished: list[tuple[Lease, bytes]] = finished,
                                  count: int = count, cands: list[bytes] = cands,
                                  heard: int = heard) -> tuple[list[Completion], Claimed, list[bytes]]:
                    done, leases, nxt, parked = await q._settle_parking(
                        finished, count=count, lease_ms=o.lease_ms, candidates=cands,
                        window=window, park=self._parking.token, park_ttl_ms=self._parking.ttl_ms)
                    self._parking.mark(parked, heard)
                    return done, leases, nxt
                f.task = asyncio.ensure_future(parking())
            else:
                f.task = asyncio.ensure_future(q.settle(
                    finished, count=count, lease_ms=o.lease_ms, candidates=cands, window=window))
            f.task.add_done_callback(self._kick_on_answer)
            flights.append(f)
            # The next flush claims from the same head: a claim takes the first claimable
            # candidates in the peek's order, which is what keeps a serial lane's order
            # (skipping the ids this one was given would let the next claim lease a later
            # job of a lane this one found busy). The ids this one leases are skipped
            # there by the script's re-check, among the spare candidates.
            await asyncio.sleep(0)  # let handlers finishing in this turn reach the next flush
        while flights:  # stopping: what the flushes in flight leased joins the table
            await self._land(flights.popleft())

    def _kick_on_answer(self, task: asyncio.Future[Any]) -> None:
        self._kick.set()

    async def _land(self, f: _Flight) -> list[bytes] | None:
        """Take the answer of flush ``f``: verdicts to their waiters, leases started, the
        next candidates (its peek); None if it failed."""
        try:
            done, leases, cands = await f.task
            self._episodes.answered()
            self._fenced.set()
        except Exception as exc:
            self._acks.fail(f.acks, exc)
            if not await self._ride_out(exc, "the drain flush"):
                raise
            return None
        finally:  # the leases it got join the table in this step (_start below)
            self._pool.claiming -= f.count
            self._acked_in_flight -= len(f.acks)
        f.leases = leases
        self._acks.resolve(f.acks, done)
        self._start(leases, claimed=True)
        return cands

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
        await self._wait(self._stopping, delay)
        return True

    @staticmethod
    async def _wait(event: asyncio.Event, seconds: float) -> None:
        if event.is_set():
            return
        # asyncio.timeout, not wait_for: no extra task, so a wake-up resumes the waiter one
        # loop turn sooner (the idle path's latency).
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await event.wait()

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
            await self._wait(self._kick, deadline - time.monotonic())
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
        if mine is None and data.startswith(b"JOB") and len(self._hints) < 64:
            self._hints.append(data)
        self._kick.set()

    async def _deaf(self, exc: BaseException) -> None:
        if not self._closed:
            self.stats.errors += 1
            log.debug("%s: wake channel lost (%r)", self.name, exc)
        await self._parking.deaf(within_s=1.0)  # no hand-off to a consumer that cannot hear
