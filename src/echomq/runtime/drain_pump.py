"""The consumer's drain loop: one flush per turn (docs/decisions/0008-drain-path.md).

A flush completes the finished jobs, claims as many jobs as the pool has room for (from
ids peeked by an earlier flush, or told by the wake channel) and peeks the next
candidates. While the backlog is deep a second flush goes out before the first is
answered (docs/decisions/0052-two-flushes-in-flight.md), so the server runs one while
this process reads the other's replies and runs its jobs. With nothing to claim it
parks in the flush (decision 0018) or waits on the consumer's kick, and it backs off
like any call when the server refuses one.

:class:`DrainPump` is one of :class:`~echomq.runtime.consumer.Consumer`'s parts; the
consumer runs it and gives it what it works with (queue, options, its pool of
concurrency, the ack batcher, parking, its events, how to start leases and how to ride
out a refusal). It keeps two pieces of the consumer's state: the ids the wake channel
told (:attr:`DrainPump.hints`, claim candidates) and the finished leases whose
completions ride a flush in flight (:attr:`DrainPump.acked_in_flight`, which
:meth:`Consumer.held` subtracts). It runs once per flush, never per job.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from echomq.client._async.queue import AsyncQueue
from echomq.client.replies import Episodes
from echomq.core.model import Completion, Lease
from echomq.protocol.gate import Claimed
from echomq.runtime.ack_batcher import AckBatcher, Pending
from echomq.runtime.consumer_options import ConsumerOptions
from echomq.runtime.parking import Parking
from echomq.runtime.slot_pool import Member, SlotPool

__all__ = ["DrainPump", "wait"]


async def wait(event: asyncio.Event, seconds: float) -> None:
    """Wait until ``event`` is set or ``seconds`` have passed."""
    if event.is_set():
        return
    # asyncio.timeout, not wait_for: no extra task, so a wake-up resumes the waiter one
    # loop turn sooner (the idle path's latency).
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await event.wait()


class Start(Protocol):
    """The consumer's start of leased jobs (claimed ones, or handed off)."""

    def __call__(self, leases: list[Lease], *, claimed: bool = False) -> None: ...


class _Flight:
    """One drain flush sent and not yet taken: its completions, its claim's count and the
    candidates it was given (``tried``)."""

    __slots__ = ("acks", "count", "leases", "reserved", "task", "timer", "tried")

    def __init__(self, acks: list[Pending], count: int, tried: list[bytes] | None) -> None:
        self.acks, self.count, self.tried = acks, count, tried
        self.task: asyncio.Future[tuple[list[Completion], Claimed, list[bytes]]]
        self.leases = Claimed([])
        self.reserved = 0  # of the pool's room, still counted for this claim
        self.timer: asyncio.TimerHandle | None = None

    def unreserve(self, pool: SlotPool) -> None:
        """The room this claim asked for no longer counts against the pool."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.reserved:
            pool.claiming -= self.reserved
            self.reserved = 0


class DrainPump:
    """The drain loop of one consumer (see the module); :meth:`run` until it stops."""

    __slots__ = ("_acks", "_episodes", "_fenced", "_kick", "_member", "_options", "_parking",
                 "_pool", "_queue", "_refused", "_ride_out", "_start", "_stopping",
                 "acked_in_flight", "hints")

    def __init__(self, queue: AsyncQueue, options: ConsumerOptions, *, member: Member,
                 pool: SlotPool, kick: asyncio.Event, acks: AckBatcher, parking: Parking,
                 stopping: asyncio.Event, episodes: Episodes, fenced: asyncio.Event,
                 start: Start, refused: Callable[[BaseException, str], float | None],
                 ride_out: Callable[[BaseException, str], Awaitable[bool]]) -> None:
        self._queue, self._options, self._member, self._pool = queue, options, member, pool
        self._kick, self._acks, self._parking, self._stopping = kick, acks, parking, stopping
        self._episodes, self._fenced = episodes, fenced  # fenced: the first flush passed the fence
        self._start, self._refused, self._ride_out = start, refused, ride_out
        self.hints: list[bytes] = []  # ids told by the wake channel: claim candidates
        self.acked_in_flight = 0  # finished leases whose completions are in a flush in flight

    async def run(self) -> None:
        """Flush until the consumer stops; then take what the flushes in flight leased.
        Cancelled or failed, it cancels those flushes (their leases expire) and raises."""
        flights: collections.deque[_Flight] = collections.deque()
        try:
            await self._turns(flights)
        except BaseException:
            # Cancelled, or stopped by a failure: the flushes still in flight are cancelled
            # like the one a cancelled flush-per-turn loop awaited; what they leased
            # expires (reap), their completions are not awaited (see Consumer.run).
            for f in flights:
                f.task.cancel()
                f.unreserve(self._pool)
                self.acked_in_flight -= len(f.acks)
            await asyncio.gather(*(f.task for f in flights), return_exceptions=True)
            raise

    async def _turns(self, flights: collections.deque[_Flight]) -> None:
        o, q = self._options, self._queue
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
                    if self.hints:  # a new job's id heard meanwhile (maybe past the peek)
                        cands, self.hints = [*self.hints[-o.concurrency:], *cands], []
                    else:
                        await wait(self._kick, o.beat_ms / 1000)
                    fresh = False
                await asyncio.sleep(0)  # let the acked tasks finish (their slots free up)
                continue
            if self._stopping.is_set():
                break
            self._start(self._parking.take())
            deep = len(cands) >= window  # a full peek: lease ahead of the slots
            free = self._pool.room(self._member, ahead=ahead if deep else 0)
            if deep:  # the room ahead goes to a second flush in flight, not a larger first
                free = min(free, o.concurrency)
            if free <= 0 and (cands or self.hints):
                self._pool.starve(self._member, self._kick)  # work and no room: a freed slot wakes us
            else:
                self._pool.fed(self._member)
            hold = held_until - asyncio.get_running_loop().time()
            if flights:
                # One flush in flight: send the next now only while the backlog is deep and
                # it carries enough; else wait for its answer or for more finished jobs.
                count = max(free, 0) if cands and hold <= 0 else 0
                if not (deep and len(self._acks) + count >= enough):
                    self._kick.clear()
                    if not flights[0].task.done():
                        await wait(self._kick, o.beat_ms / 1000)
                    continue
            elif not self._acks and (free <= 0 or (fresh and not cands) or hold > 0):
                if self.hints and free > 0:  # told of a new job during the last flush:
                    held_until, fresh = 0.0, False  # claim it now, not after a beat
                    cands, self.hints = cands or self.hints[-o.concurrency:], []
                    continue
                self._kick.clear()  # before parking: a kick during its round trip is kept
                if (free > 0 and hold <= 0 and o.handoff and self._parking.hearing
                        and not await self._parking.park(self._refused)):
                    fresh = False  # pending has work after all: claim it
                    continue
                await wait(self._kick, min(o.beat_ms / 1000, hold) if hold > 0
                                 else o.beat_ms / 1000)
                fresh = False  # woken or polled: look at pending again
                if self._stopping.is_set():
                    break
                if self.hints:
                    held_until = 0.0  # a wake-up (a resume, a new job): look again now
                if self.hints and not cands:
                    # Woken with the new job's id: claim it in the same flush as the peek,
                    # one round trip from the wake-up to the lease (the script re-checks it).
                    cands, self.hints = self.hints[-o.concurrency:], []
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
            if count:  # room spent while the claim is in flight, for at most a beat:
                self._pool.claiming += count
                f.reserved = count
                f.timer = asyncio.get_running_loop().call_later(
                    o.beat_ms / 1000, self._stale, f)
            self.acked_in_flight += len(f.acks)  # finished: no longer held against the room
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

    def _stale(self, f: _Flight) -> None:
        """A claim unanswered after a beat stops holding the pool's room. A call to a shard
        whose primary died rides out the failover inside the connector's retry budget
        (seconds); counted all that time, its room starved the other shards' members of a
        shared pool (test_sharded_cluster.py's stuck-claim test: 0 of 40 jobs admitted to
        the live shards ran during the failover). If it answers after all, its leases join
        the table and wait for run slots like leases held ahead: the run bound stays strict."""
        f.timer = None
        f.unreserve(self._pool)
        if self._pool.starved:
            self._pool.nudge()

    async def _land(self, f: _Flight) -> list[bytes] | None:
        """Take the answer of flush ``f``: verdicts to their waiters, leases started, the
        next candidates (its peek); None if it failed."""
        try:
            try:
                done, leases, cands = await f.task
            finally:  # answered or failed: its room is free again, before any back-off (a
                # success's leases join the table in this same step: _start below)
                f.unreserve(self._pool)
                self.acked_in_flight -= len(f.acks)
            self._episodes.answered()
            self._fenced.set()
        except Exception as exc:
            self._acks.fail(f.acks, exc)
            if not await self._ride_out(exc, "the drain flush"):
                raise
            return None
        f.leases = leases
        self._acks.resolve(f.acks, done)
        self._start(leases, claimed=True)
        return cands
