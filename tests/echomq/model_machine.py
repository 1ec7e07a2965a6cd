"""The model-based test's state machine: random interleavings of every transition against a
real server (single or cluster), checked against ``model_ref.Ref`` after every step.

Every state is reached: pending, active, delayed, done, dead (by failure exhaustion and
by reaping expired leases past the limit); fair and serial lanes; delayed admission;
``enqueue_many``; the consumers' batched settle path (``complete_batch`` + claim + peek
in one flush); retention (``trim``), ``purge_dead`` and ``requeue_dead``; cancellation of
pending, delayed and active jobs (then ended cancelled by complete, retry or reap),
progress reports fenced by the attempt, and results read back (done, dead, cancelled);
deadlines to start by (``expires_ms``, decision 0045): a job past its deadline is never
leased (claim ends it expired) and the reaper ends the unclaimed ones, never one before.

Leases expire and delays come due on the server's own clock: a short lease (or delay)
is a few milliseconds, and the machine polls the server's ``TIME`` until it has passed
before the model calls it expired (or due). Nothing in the server is edited by hand.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, ClassVar

import hypothesis.strategies as st
import pytest
import redis
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from redis.cluster import ClusterNode, RedisCluster

from echomq import (
    CancelOutcome,
    ClusterConnector,
    Completion,
    Connector,
    InvalidArgument,
    JobCancelled,
    JobExpired,
    JobFailed,
    JobNotFound,
    Lease,
    ProgressOutcome,
    ProtocolVersionError,
    Queue,
    QueueOptions,
    ResultTimeout,
    RetryOutcome,
    Verdict,
    generate,
)
from echomq.core.failures import parse_failure
from echomq.core.hooks import Hooks
from echomq.core.outcomes import Backoff
from echomq.protocol.gate import PRIORITY_AGE, Claimed, Gate, RateLimit
from echomq.protocol.schedules import Schedule, decode_schedule
from echomq.protocol.scripts import bundle
from echomq.runtime.handling import call_handler, timeout_for
from tests.echomq.model_ref import NOW, SET_OF, Ref

MAX_ATTEMPTS = 2
LONG = 600_000
SHORT = 2  # ms: a lease or delay the machine then waits out on the server clock
EXP_SHORT = 5  # ms: a deadline the machine waits out at once (more than a SHORT delay)
EXP_LONG = 2 * LONG  # a deadline no run reaches (more than a LONG delay)
TICK = 3_600_000  # ms between the model schedule's ticks (an example takes far less)
CAP = 10  # live jobs per example: small, so jobs go round many times
LANES = [None, "f", "g", "s"]  # f, g: fair lanes; s: a serial lane
CALLS = ["heartbeat", "heartbeat_many", "complete", "complete_many", "retry", "defer", "progress"]
_names = itertools.count()

REACH = frozenset({
    # every state, and the three ways to die
    "pending", "active", "delayed", "done", "dead", "dead by failures", "dead by reap",
    "dead by giving up",
    # lanes: fair tags interleave, a serial lane holds its next job back, a head goes first
    "fair tag", "fair tag behind another", "serial lane held: skipped", "lane head goes first",
    "claimed on lane f", "claimed on lane s", "claimed on lane None",
    # admission paths, and the hand-off to a parked consumer (decision 0018)
    "delayed admission", "enqueue_many", "admit_many", "handed off", "hand-off held",
    # the fences
    "expired lease refused", "other attempt's token refused", "forged token refused",
    "expired lease requeued", "version fence refused",
    # a consumer's beat (heartbeat_batch, decision 0055): leases kept and lost in one call
    "heartbeat batch extended", "heartbeat batch lost",
    # handler timeouts and schedules
    "handler timeout handed back", "job's own timeout handed back", "schedule ticks admitted",
    "schedule ticks below the mark refused", "schedule tick not due refused",
    # the claim gate: pause, rate limits per queue and per lane, priorities
    "paused claim", "queue rate held", "lane rate held", "priority tag", "claimed at priority 3",
    # priorities on the same virtual time for every kind of job, on a queue with history
    "history past AGE", "plain versus laned after history",
    # the batched settle path and the finish variants
    "complete_batch completed", "settle completed", "settle claimed", "done and deleted at once",
    # upkeep: promote, retention, dead jobs
    "promoted", "done purged", "dead purged", "dead requeued", "retention kept young rows",
    # cancellation, progress and results (decision 0023)
    "cancelled pending", "cancelled delayed", "cancel asked", "cancelled by complete",
    "cancelled by retry", "cancelled by reap", "progress recorded", "stale progress refused",
    "result done", "result dead", "result cancelled", "result not ended",
    # expiry (decision 0045): a deadline refused, kept, ended by claim or by the reaper
    "deadline refused", "deadline admitted", "expired by claim", "expired by the reaper",
    "result expired", "expired",
})
"""What every full run must reach (the test asserts it from ``QueueMachine.reached``)."""
GATE_REACH = frozenset({"paused claim", "queue rate held", "lane rate held", "handed off",
                        "hand-off held", "history past AGE", "plain versus laned after history"})
"""What only a machine on one queue reaches (a sharded queue has one gate per shard)."""


_SETS = ("pending", "active", "delayed", "done", "dead", "expired")

_Op = tuple[str, int, Callable[[Any], object] | None, dict[str, Any]]
_OPS: list[_Op] = []


def op(weight: int = 1, *, when: Callable[[Any], object] | None = None,
       **params: Any) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Register a transition: drawn with ``weight`` among those whose ``when`` holds.

    One hypothesis rule (``step``) dispatches them, so every run spreads its steps over
    all transitions (hypothesis would otherwise switch whole rules off per example).
    """

    def register(fn: Callable[..., None]) -> Callable[..., None]:
        _OPS.append((fn.__name__, weight, when, params))
        return fn

    return register


def _int(v: Any) -> int:
    return int(float(v))


class QueueMachine(RuleBasedStateMachine):
    """Set ``url`` and ``cluster`` on the class before running it."""

    url: str = ""
    cluster: bool = False
    reached: ClassVar[Counter[str]] = Counter()

    def __init__(self) -> None:
        super().__init__()
        if self.cluster:
            self.conn: Any = ClusterConnector.from_url(self.url)
            self.raw: Any = RedisCluster(startup_nodes=[ClusterNode(h, p) for h, p in self.conn.seeds])
        else:
            self.conn = Connector.from_url(self.url)
            self.raw = redis.Redis.from_url(self.url)
        self.name = f"model-{os.getpid()}-{next(_names)}"
        self.window = LONG
        self.with_history = False  # drawn per example (choose_window)
        opts = dict(max_attempts=MAX_ATTEMPTS, keep_done_ms=LONG, keep_dead_ms=LONG)
        self.q = Queue(self.conn, self.name, options=QueueOptions(**opts))
        self.q_drop = Queue(self.conn, self.name, options=QueueOptions(**(opts | {"keep_done_ms": 0})))
        self.q_short = Queue(self.conn, self.name, options=QueueOptions(
            **(opts | {"keep_done_ms": 1, "keep_dead_ms": 1, "keep_expired_ms": 1})))
        # Every script in the server's cache first: a NOSCRIPT answer makes a flush send the
        # unanswered calls again after the rest (connector.flush), so a settle's claim could
        # run before its own completions, an order the model does not follow.
        for script in bundle().values():
            self.conn.load(script)
        self.ref = Ref(max_attempts=MAX_ATTEMPTS)
        self.leases: list[Lease] = []
        self.refused: set[str] = set()  # ids refused by kind: must never exist
        self.marks: dict[str, int] = {}  # the model schedule's mark per queue (server ms)
        self.tick_offset: int | None = None
        self.fresh_lanes = itertools.count()  # per example: a replay draws the same lanes

    def teardown(self) -> None:
        QueueMachine.reached.update(self.ref.seen)
        keys = [self.q.keys[k] for k in ("pending", "active", "delayed", "done", "dead", "lanes",
                                          "meta", "inflight", "maint", "rate", "lane_rate",
                                          "lane_seen", "parked", "expired", "expiring")]
        keys += [self.q.job_key(i) for i in [*self.ref.jobs, *self.ref.gone]]
        keys += [f"emq:{{{queue}}}:sched:model" for queue in self.marks]
        for key in keys:
            self.raw.delete(key)
        self.conn.close()
        self.raw.close()

    # ------------------------------------------------------------- server clock
    def now(self) -> int:
        """The server's clock (ms) as the scripts read it, from the node owning the queue."""
        if self.cluster:
            sec, usec = self.raw.time(target_nodes=self.raw.get_node_from_key(self.q.keys["meta"]))
        else:
            sec, usec = self.raw.time()
        return int(sec) * 1000 + int(usec) // 1000

    def wait_past(self, ms: int) -> None:
        """Poll the server clock until it is past ``ms`` (bounded)."""
        give_up = time.monotonic() + 10
        while self.now() <= ms:
            assert time.monotonic() < give_up, "server clock did not move"
            time.sleep(0.001)

    def queue_of(self, jid: str) -> Any:
        """The single-slot queue that holds ``jid`` (a sharded machine: its shard)."""
        return self.q

    def live(self) -> int:
        """Jobs that can still move (a job delayed for LONG is inert: not counted)."""
        return sum(1 for j in self.ref.jobs.values()
                   if j.state in ("pending", "active") or (j.state == "delayed" and j.ripe))

    def pick(self, data: st.DataObject) -> Lease:
        """A lease: three times in four one that holds its job now, if any does."""
        holding = [x for x in self.leases if self.ref.live(x.id, x.attempt)]
        if holding and data.draw(st.integers(0, 3)):
            return data.draw(st.sampled_from(holding))
        return data.draw(st.sampled_from(self.leases))

    def _adopt(self, leases: list[Lease], lease_ms: int, t0: int, t1: int) -> None:
        for lease in leases:
            job = self.ref.jobs[lease.id]
            assert lease.attempt == job.attempts and lease.payload == job.payload
            assert lease.lane == job.lane and lease.timeout_ms == job.timeout
            assert t0 + lease_ms <= lease.deadline_ms <= t1 + lease_ms, (t0, lease, t1)
            job.deadline = lease.deadline_ms
        self.leases = (self.leases + leases)[-30:]
        for jid in self.ref.lapsed:  # ended expired by the claim just made: its time
            job = self.ref.jobs.get(jid)
            if job is not None and job.state == "expired" and job.at == (0, 0):
                job.at = (t0, t1)
        if leases and lease_ms == SHORT:
            self.wait_past(max(x.deadline_ms for x in leases))
            for lease in leases:
                self.ref.jobs[lease.id].expired = True

    def _delayed(self, jid: str, delay: int, t0: int, t1: int) -> None:
        job = self.ref.jobs[jid]
        due = _int(self.raw.zscore(self.q.keys["delayed"], jid))
        assert t0 + delay <= due <= t1 + delay, (t0, due, t1)
        job.due, job.due_known = due, True
        if delay == SHORT:
            self.wait_past(due)
            job.ripe = True

    def gated(self) -> bool:
        """The gate's operations run on one queue and its model (a sharded queue has one
        gate per shard; its machine leaves them out)."""
        return isinstance(self.ref, Ref)

    def _gate_ready(self) -> None:
        """Before a claim: a short window is waited out (the model's logs are then empty)."""
        if not self.gated():
            return
        times = [*self.ref.qlog, *(t for log in self.ref.llog.values() for t in log)]
        if self.window == SHORT and times:
            self.wait_past(max(times) + SHORT)
            self.ref.forget_logs()

    def _gated(self, got: Claimed, lease_ms: int, called: bool, t0: int, t1: int) -> None:
        """The claim's word on the gate is the model's, and its leases go into the logs."""
        if not called:
            assert not got.paused and got.wait_ms is None
        elif self.ref.paused:
            assert got.paused and got.wait_ms is None and not got
        elif not self.ref.held:
            assert not got.paused and got.wait_ms is None, got
        else:
            logged = [d for d in self.ref.held if d != NOW]
            assert got.wait_ms is not None and not got.paused, got
            if logged:  # due at the oldest logged lease + the window, measured from now
                assert t0 <= min(logged) - got.wait_ms <= t1, (logged, got, t0, t1)
            else:  # held by this claim's own leases: a whole window
                assert got.wait_ms == self.window, got
        self.ref.logged(len(got), got[0].deadline_ms - lease_ms if got else None)

    @initialize(window=st.sampled_from([LONG, SHORT, SHORT]), history=st.sampled_from([True, False, False]))
    def choose_window(self, window: int, history: bool) -> None:
        """One rate window per example (a window that changed would leave the server's logs
        with entries the model cannot place): long (never ends in a run) or short (waited
        out before every claim, so only a claim's own leases count against it). A third of
        the examples may run the long history step (about a second of CPU each)."""
        self.window = window
        self.with_history = history

    def open_gate(self) -> None:
        """Resume the queue and lift its limits (the machine's own checked steps), so a
        step that needs a claim to lease finds the gate open whatever came before."""
        if self.ref.paused:
            self.resume()
        if self.ref.rate or self.ref.lane_rate:
            self.set_limits(None, None)

    @rule(data=st.data())
    def step(self, data: st.DataObject) -> None:
        enabled = [o for o in _OPS if o[2] is None or o[2](self)]
        name = data.draw(st.sampled_from([o[0] for o in enabled for _ in range(o[1])]), label="op")
        params = next(o[3] for o in enabled if o[0] == name)
        kwargs = {k: data if k == "data" else data.draw(v, label=k) for k, v in params.items()}
        getattr(self, name)(**kwargs)

    # -------------------------------------------------------------- admission
    @op(3, when=lambda self: self.live() < CAP, lane=st.sampled_from(LANES),
        delay=st.sampled_from([0, 0, 0, SHORT, LONG]),
        max_attempts=st.sampled_from([None, 1, 1, 3]), plain=st.booleans(),
        prio=st.sampled_from([0, 0, 1, 3, 3]), timeout=st.sampled_from([None, None, 1, 5]),
        expires=st.sampled_from([None, None, None, EXP_SHORT, EXP_SHORT, EXP_LONG]))
    def admit(self, lane: str | None, delay: int, max_attempts: int | None, plain: bool,
              prio: int, timeout: int | None, expires: int | None) -> None:
        jid = generate("JOB")
        payload = jid.encode()
        if expires is not None and expires <= delay:  # it could never start: refused, unwritten
            with pytest.raises(InvalidArgument):
                self.q.admit(jid, payload, lane=lane, delay_ms=delay, expires_ms=expires)
            self.ref.seen["deadline refused"] += 1
            self.refused.add(jid)
            return
        t0 = self.now()
        if plain and lane is None and not delay and max_attempts is None and not prio \
                and timeout is None and expires is None:
            assert self.q.enqueue(jid, payload) is Verdict.ENQUEUED
        else:
            got = self.q.admit(jid, payload, lane=lane, delay_ms=delay, serial=lane == "s",
                               max_attempts=max_attempts, priority=prio, timeout_ms=timeout,
                               expires_ms=expires)
            assert got is Verdict.ENQUEUED
        t1 = self.now()
        assert self.ref.admit(jid, payload, lane, lane == "s", max_attempts, delayed=delay > 0,
                              prio=prio, timeout=timeout)
        if expires is not None:  # the deadline, fixed at admission on the server clock
            exp = _int(self.raw.hget(self.queue_of(jid).job_key(jid), "exp"))
            assert t0 + expires <= exp <= t1 + expires, (t0, exp, t1)
            if expires == EXP_SHORT:
                self.wait_past(exp)
            self.ref.set_deadline(jid, exp, expires == EXP_SHORT)
            self.ref.seen["deadline admitted"] += 1
        if delay:
            self.ref.seen["delayed admission"] += 1
            self._delayed(jid, delay, t0, t1)

    @op(when=lambda self: self.live() < CAP, lane=st.sampled_from(LANES),
        delay=st.sampled_from([SHORT, LONG]), early=st.sampled_from([0, 1]))
    def impossible_deadline(self, lane: str | None, delay: int, early: int) -> None:
        """A deadline at or before the job's delay ends: it could never start, so the
        admission is refused before any write (``admit`` draws this case too, but about four
        times a round: a round now and then missed it)."""
        jid = generate("JOB")
        with pytest.raises(InvalidArgument):
            self.q.admit(jid, jid.encode(), lane=lane, delay_ms=delay, serial=lane == "s",
                         expires_ms=delay - early)
        self.ref.seen["deadline refused"] += 1
        self.refused.add(jid)

    @op(2, when=lambda self: self.live() < CAP, data=st.data(), new=st.integers(1, 3),
        lane=st.sampled_from(LANES))
    def enqueue_many(self, data: st.DataObject, new: int, lane: str | None) -> None:
        """New ids, an id repeated inside the batch, known ids and a wrong-kind id: one
        verdict each, in order; only the first sight of a new id is written."""
        fresh = [generate("JOB") for _ in range(new)]
        known = sorted(self.ref.jobs)
        again = data.draw(st.lists(st.sampled_from(known), max_size=2) if known else st.just([]))
        items = [*fresh, fresh[0], *again]
        items = data.draw(st.permutations(items))
        wrong = generate("ORD")
        items.insert(data.draw(st.integers(0, len(items))), wrong)
        self.refused.add(wrong)
        self.ref.seen["enqueue_many" if lane is None else "admit_many"] += 1
        if lane is None:
            got = self.q.enqueue_many([(i, i.encode()) for i in items])
        else:
            got = self.q.admit_many([(i, i.encode(), lane) for i in items], serial=lane == "s")
        expect = []
        for i in items:
            if i == wrong:
                expect.append(Verdict.KIND)
            elif self.ref.admit(i, i.encode(), lane, lane == "s"):
                expect.append(Verdict.ENQUEUED)
            else:
                expect.append(Verdict.DUPLICATE)
        assert got == expect

    @op(5, when=lambda self: self.gated() and self.live() < CAP and not self.ref.ids("pending"),
        short=st.booleans(), pause=st.booleans())
    def park_then_enqueue(self, short: bool, pause: bool) -> None:
        """A consumer parks on the empty queue, then a job is admitted: the admission leases
        it to the consumer in the same step (attempt 1, a lease on the server clock) unless
        the claim gate holds it (paused, the queue's rate reached): then it waits pending.
        Half the time the queue is paused first (else only the gate's own steps hold it)."""
        lease_ms, token = SHORT if short else LONG, f"model{next(_names)}"
        if pause:
            self.pause()
        self._gate_ready()
        assert self.q.park(token, lease_ms=lease_ms, ttl_ms=LONG)  # pending is empty
        jid = generate("JOB")
        t0 = self.now()
        assert self.q.enqueue(jid, jid.encode()) is Verdict.ENQUEUED
        t1 = self.now()
        assert self.ref.admit(jid, jid.encode())
        self.q.park(token, lease_ms=lease_ms, ttl_ms=0)  # withdrawn if it was not used up
        if not self.ref.handoff(jid):
            self.ref.seen["hand-off held"] += 1
            return
        self.ref.seen["handed off"] += 1
        deadline = _int(self.raw.zscore(self.q.keys["active"], jid))
        self.ref.logged(1, deadline - lease_ms)
        self._adopt([Lease(self.q.name, jid, 1, jid.encode(), None, deadline)], lease_ms, t0, t1)

    @op(when=lambda self: self.ref.jobs, data=st.data())
    def enqueue_duplicate(self, data: st.DataObject) -> None:
        jid = data.draw(st.sampled_from(sorted(self.ref.jobs)))
        assert self.q.enqueue(jid, b"other") is Verdict.DUPLICATE
        assert self.q.admit(jid, b"other", lane="f", delay_ms=LONG) is Verdict.DUPLICATE

    # ------------------------------------------------------------ claim plane
    def _claim(self, n: int, lease_ms: int, window: int | None = None) -> list[Lease]:
        peek = window or 2 * n + 64
        self._gate_ready()
        candidates = self.ref.pending_order()[:peek]
        expect = self.ref.claim(candidates, n)
        t0 = self.now()
        got = self.q.claim(n, lease_ms=lease_ms, window=window)
        t1 = self.now()
        assert [x.id for x in got] == expect
        self._gated(got, lease_ms, bool(candidates), t0, t1)
        self._adopt(got, lease_ms, t0, t1)
        return got

    @op(3, n=st.integers(1, 4), short=st.booleans(), window=st.sampled_from([None, None, 1, 3]))
    def claim(self, n: int, short: bool, window: int | None) -> None:
        self._claim(n, SHORT if short else LONG, window)

    @op(when=lambda self: bool(self.ref.ids("pending")))
    def fail_until_dead(self) -> None:
        """Claim the first pending job and fail it at once, again and again: some job dies."""
        for _ in range(2 * CAP):
            leases = self._claim(1, LONG)
            if not leases or self._retry(leases[0], True, 0) is RetryOutcome.DEAD:
                if leases:  # a dead job's result is its error
                    with pytest.raises(JobFailed, match="boom"):
                        self.q.result(leases[0].id, timeout=0)
                    self.ref.seen["result dead"] += 1
                return

    @op(when=lambda self: bool(self.ref.ids("pending")))
    def expire_until_dead(self) -> None:
        """Claim the first pending job on a short lease, let it expire, reap: some job dies."""
        for _ in range(2 * CAP):
            if not self._claim(1, SHORT) or self._reap()[1]:
                return

    def _claim_exactly(self, jid: str, lease_ms: int) -> list[Lease]:
        """Claim one named job through the settle path (the claim re-checks it)."""
        self._gate_ready()
        expect = self.ref.claim([jid], 1)
        t0 = self.now()
        _, got, peeked = self.q.settle([], count=1, lease_ms=lease_ms, candidates=[jid.encode()],
                                       window=1)
        t1 = self.now()
        assert [x.id for x in got] == expect
        self._gated(got, lease_ms, True, t0, t1)
        assert [p.decode() for p in peeked] == self.ref.pending_order()[:1]
        self._adopt(got, lease_ms, t0, t1)
        return got

    @op(2, when=lambda self: self.live() < CAP and not (self.gated() and (
            self.ref.paused or self.ref.rate or self.ref.lane_rate)),
        limit=st.sampled_from([1, 3]), via=st.sampled_from(["retry", "reap"]))
    def own_limit(self, limit: int, via: str) -> None:
        """A job with its own attempt limit (not the queue's) fails until it is dead: by
        retry, or by its leases expiring and reap; it dies at exactly its own limit."""
        jid = generate("JOB")
        assert self.q.admit(jid, jid.encode(), max_attempts=limit) is Verdict.ENQUEUED
        self.ref.admit(jid, jid.encode(), max_attempts=limit)
        for _ in range(limit):
            assert self.ref.jobs[jid].state == "pending"
            (lease,) = self._claim_exactly(jid, LONG if via == "retry" else SHORT)
            if via == "retry":
                self._retry(lease, True, 0)
            else:
                self._reap()
        assert self.ref.jobs[jid].state == "dead"

    def _open_gate(self) -> None:
        """Resume the queue and lift its limits, through the model (a step that needs its
        claims to lease, as a worker's operator would)."""
        if self.gated() and self.ref.paused:
            self.resume()
        if self.gated() and (self.ref.rate or self.ref.lane_rate):
            self.set_limits(None, None)

    @op(2, when=lambda self: self.live() < CAP - 1, via=st.sampled_from(["retry", "reap"]),
        calls=st.permutations(CALLS), keep=st.booleans())
    def second_attempt(self, via: str, calls: list[str], keep: bool) -> None:
        """Two jobs on a fresh serial lane: the head runs, the next is held back; the head's
        first attempt fails (retry) or its lease expires (reap), so it goes back first and
        runs again; the first attempt's worker then comes back with its real lease and every
        transition refuses it; the second attempt completes."""
        self._open_gate()
        lane = f"z{next(self.fresh_lanes)}"
        head, after = generate("JOB"), generate("JOB")
        for jid in (head, after):
            assert self.q.admit(jid, jid.encode(), lane=lane, serial=True) is Verdict.ENQUEUED
            assert self.ref.admit(jid, jid.encode(), lane, True)
        (first,) = self._claim_exactly(head, LONG if via == "retry" else SHORT)
        assert self._claim_exactly(after, LONG) == []  # the serial lane is held by the head
        if via == "retry":
            assert self._retry(first, True, 0) is RetryOutcome.SCHEDULED
        else:
            assert self._reap()[0] >= 1
        assert self.ref.jobs[head].state == "pending"
        (second,) = self._claim_exactly(head, LONG)
        assert second.attempt == first.attempt + 1
        assert not self.ref.holds(head, first.attempt)
        for call in calls:
            self._refused(first, call)
        t0 = self.now()
        got = (self.q if keep else self.q_drop).complete(second, b"")
        t1 = self.now()
        assert got is self.ref.complete(head, second.attempt, keep, (t0, t1)) is Completion.COMPLETED

    @op(2, when=lambda self: self.leases, data=st.data(), short=st.booleans())
    def heartbeat(self, data: st.DataObject, short: bool) -> None:
        lease = self.pick(data)
        lease_ms = SHORT if short else LONG
        holds = self.ref.holds(lease.id, lease.attempt)
        t0 = self.now()
        got = self.q.heartbeat(lease, lease_ms=lease_ms)
        t1 = self.now()
        if not holds:
            assert got is None
            return
        assert got is not None and t0 + lease_ms <= got <= t1 + lease_ms
        job = self.ref.jobs[lease.id]
        assert got.cancel == job.cancel  # the beat tells a running attempt it was asked to stop
        job.deadline = got
        if short:
            self.wait_past(got)
            job.expired = True

    @op(2, when=lambda self: self.leases, data=st.data(), short=st.booleans())
    def heartbeat_many(self, data: st.DataObject, short: bool) -> None:
        """A consumer's beat (heartbeat_batch, decision 0055): up to 8 of the leases seen,
        live, expired, of another attempt, finished or asked to stop, a lease given twice
        too; each answered exactly as ``heartbeat`` answers it alone."""
        leases = data.draw(st.lists(st.sampled_from(self.leases), min_size=1, max_size=8),
                           label="leases")
        lease_ms = SHORT if short else LONG
        holds = [self.ref.holds(x.id, x.attempt) for x in leases]
        t0 = self.now()
        got = self.q.heartbeat_many(leases, lease_ms=lease_ms)
        t1 = self.now()
        assert len(got) == len(leases)
        kept = {}
        for lease, held, beat in zip(leases, holds, got, strict=True):
            if not held:
                assert beat is None, (lease, beat)
                continue
            assert beat is not None and t0 + lease_ms <= beat <= t1 + lease_ms, (t0, beat, t1)
            assert beat.cancel == self.ref.jobs[lease.id].cancel  # the sign tells a stop
            kept[lease.id] = beat
        for jid, beat in kept.items():
            self.ref.jobs[jid].deadline = beat
        self.ref.seen["heartbeat batch extended"] += bool(kept)
        self.ref.seen["heartbeat batch lost"] += not all(holds)
        if short and kept:
            self.wait_past(max(kept.values()))
            for jid in kept:
                self.ref.jobs[jid].expired = True

    def _refused(self, lease: Lease, call: str) -> None:
        """A call of ``lease`` is refused (the invariant then checks nothing changed)."""
        if call == "heartbeat":
            assert self.q.heartbeat(lease, lease_ms=LONG) is None
        elif call == "heartbeat_many":
            assert self.q.heartbeat_many([lease], lease_ms=LONG) == [None]
        elif call == "complete":
            assert self.q.complete(lease) is Completion.STALE
        elif call == "complete_many":
            assert self.q.complete_many([lease]) == [Completion.STALE]
        elif call == "retry":
            assert self.q.retry(lease, delay_ms=0, error="zombie") is RetryOutcome.STALE
        elif call == "progress":
            assert self.q.report_progress(lease, b"zombie") is ProgressOutcome.STALE
            self.ref.seen["stale progress refused"] += 1
        else:
            assert self.q.defer(lease, delay_ms=0) is RetryOutcome.STALE

    @op(4, when=lambda self: any(j.state == "active" and not j.expired
                                 for j in self.ref.jobs.values()),
        data=st.data(), calls=st.permutations(CALLS), older=st.booleans())
    def forged_token(self, data: st.DataObject, calls: list[str], older: bool) -> None:
        """A zombie of another attempt (an older or a future token) presents itself while
        the job runs under a live lease: every transition refuses it, nothing changes."""
        jid = data.draw(st.sampled_from([i for i, j in self.ref.jobs.items()
                                         if j.state == "active" and not j.expired]))
        job = self.ref.jobs[jid]
        attempt = job.attempts - 1 if older and job.attempts > 1 else job.attempts + 1
        lease = Lease(queue=self.name, id=jid, attempt=attempt, payload=job.payload,
                      lane=job.lane, deadline_ms=job.deadline)
        self.ref.seen["forged token refused"] += 1
        for call in calls:
            self._refused(lease, call)

    def _zombies(self) -> list[Lease]:
        """Real leases of an earlier attempt whose job now runs under a newer attempt."""
        return [x for x in self.leases if (j := self.ref.jobs.get(x.id)) is not None
                and j.state == "active" and j.attempts != x.attempt]

    @op(4, when=lambda self: self._zombies(), data=st.data(), calls=st.permutations(CALLS))
    def zombie(self, data: st.DataObject, calls: list[str]) -> None:
        """The worker of an earlier attempt (its lease expired and was reaped, or it was
        retried) comes back with its own real lease while the job runs again under a newer
        attempt: the model refuses it, and so does every transition (nothing changes)."""
        lease = data.draw(st.sampled_from(self._zombies()))
        assert not self.ref.holds(lease.id, lease.attempt)
        for call in calls:
            self._refused(lease, call)

    @op(4, when=lambda self: any(j.state == "active" and j.expired for j in self.ref.jobs.values()),
        data=st.data(), calls=st.permutations(CALLS))
    def late_finish(self, data: st.DataObject, calls: list[str]) -> None:
        """The worker whose lease expired (paused, slow) comes back before any reap: its own
        token, but the deadline has passed on the server clock, so it is refused."""
        jid = data.draw(st.sampled_from([i for i, j in self.ref.jobs.items()
                                         if j.state == "active" and j.expired]))
        job = self.ref.jobs[jid]
        assert not self.ref.holds(jid, job.attempts)
        lease = Lease(queue=self.name, id=jid, attempt=job.attempts, payload=job.payload,
                      lane=job.lane, deadline_ms=job.deadline)
        for call in calls:
            self._refused(lease, call)

    @op(2, when=lambda self: self.leases, data=st.data(), keep=st.booleans())
    def complete(self, data: st.DataObject, keep: bool) -> None:
        lease = self.pick(data)
        t0 = self.now()
        got = (self.q if keep else self.q_drop).complete(lease, lease.id.encode())
        t1 = self.now()
        assert got is self.ref.complete(lease.id, lease.attempt, keep, (t0, t1), lease.id.encode())
        if got is Completion.COMPLETED and keep:  # the result is kept with the row
            assert self.q.result(lease.id, timeout=0) == lease.id.encode()
            self.ref.seen["result done"] += 1

    @op(2, when=lambda self: self.leases, data=st.data(), keep=st.booleans())
    def complete_many(self, data: st.DataObject, keep: bool) -> None:
        """The batched path: one complete_batch call, a repeated lease answered stale."""
        picked = [self.pick(data) for _ in range(data.draw(st.integers(1, 4)))]
        t0 = self.now()
        got = (self.q if keep else self.q_drop).complete_many(picked)
        t1 = self.now()
        assert got == [self.ref.complete(x.id, x.attempt, keep, (t0, t1)) for x in picked]
        if Completion.COMPLETED in got:
            self.ref.seen["complete_batch completed"] += 1

    @op(when=lambda self: self.live() < CAP, data=st.data(), keep=st.booleans())
    def complete_many_fresh(self, data: st.DataObject, keep: bool) -> None:
        """The batched path with one lease that surely holds its job (a fresh one, the gate
        opened first) among others picked as ``complete_many`` picks them: its picks held
        no live lease in some rounds, so "complete_batch completed" was reached about twice
        a round, or never."""
        if self.gated():
            self.open_gate()
        jid = generate("JOB")
        assert self.q.admit(jid, jid.encode()) is Verdict.ENQUEUED
        self.ref.admit(jid, jid.encode())
        (fresh,) = self._claim_exactly(jid, LONG)
        picked = [self.pick(data) for _ in range(data.draw(st.integers(0, 2)))]
        picked.insert(data.draw(st.integers(0, len(picked))), fresh)
        t0 = self.now()
        got = (self.q if keep else self.q_drop).complete_many(picked)
        t1 = self.now()
        assert got == [self.ref.complete(x.id, x.attempt, keep, (t0, t1)) for x in picked]
        assert Completion.COMPLETED in got
        self.ref.seen["complete_batch completed"] += 1
        if keep:  # kept with its row: its result is read back at once
            job = self.ref.jobs[fresh.id]
            assert job.state == "done"
            assert self.q.result(fresh.id, timeout=0) == (job.result or b"")
            self.ref.seen["result done"] += 1

    @op(3, data=st.data(), count=st.integers(1, 4), short=st.booleans(), window=st.integers(1, 6))
    def settle(self, data: st.DataObject, count: int, short: bool, window: int) -> None:
        """The consumer's drain flush: complete finished attempts, claim from candidates
        peeked earlier (some of which moved meanwhile), peek the next ones."""
        finished = [self.pick(data) for _ in range(data.draw(st.integers(0, 3)))] if self.leases else []
        pool = self.ref.pending_order() + sorted(self.ref.jobs)[:3]
        candidates = data.draw(st.lists(st.sampled_from(pool), unique=True, max_size=6)
                               if pool else st.just([]))
        lease_ms = SHORT if short else LONG
        self._gate_ready()
        t0 = self.now()
        done, leases, peeked = self.q.settle(
            [(x, b"") for x in finished], count=count, lease_ms=lease_ms,
            candidates=[c.encode() for c in candidates], window=window)
        t1 = self.now()
        assert done == [self.ref.complete(x.id, x.attempt, True, (t0, t1)) for x in finished]
        expect = self.ref.claim(candidates, count) if candidates else []
        assert [x.id for x in leases] == expect
        self._gated(leases, lease_ms, bool(candidates), t0, t1)
        assert [p.decode() for p in peeked] == self.ref.pending_order()[:window]
        self._adopt(leases, lease_ms, t0, t1)
        self.ref.seen["settle completed"] += Completion.COMPLETED in done
        self.ref.seen["settle claimed"] += bool(leases)

    def _retry(self, lease: Lease, fail: bool, delay: int, give_up: bool = False) -> RetryOutcome:
        t0 = self.now()
        if fail:
            got = self.q.retry(lease, delay_ms=delay, error="boom", give_up=give_up)
        else:
            got = self.q.defer(lease, delay_ms=delay)
        t1 = self.now()
        assert got is self.ref.retry(lease.id, lease.attempt, fail, delay > 0, (t0, t1),
                                     give_up=fail and give_up)
        if got is RetryOutcome.SCHEDULED and delay:
            self._delayed(lease.id, delay, t0, t1)
        return got

    @op(2, when=lambda self: self.leases, data=st.data(), fail=st.sampled_from([True, True, False]),
          delay=st.sampled_from([0, 0, SHORT, SHORT, LONG]), give_up=st.sampled_from([False, False, True]))
    def retry(self, data: st.DataObject, fail: bool, delay: int, give_up: bool) -> None:
        """A failure (or a deferral); a third of the failures give up: dead at once (the
        retry script's mode dead, a typed task's give_up_on)."""
        self._retry(self.pick(data), fail, delay, give_up)

    @op(2, when=lambda self: any(self.ref.live(x.id, x.attempt) for x in self.leases),
        data=st.data())
    def give_up(self, data: st.DataObject) -> None:
        """A live attempt gives up (a typed task's give_up_on): dead now, below its limit."""
        self._retry(data.draw(st.sampled_from(
            [x for x in self.leases if self.ref.live(x.id, x.attempt)])), True, 0, True)

    # ------------------------------------------------------- timeouts, schedules
    @op(2, when=lambda self: any(self.ref.live(x.id, x.attempt) for x in self.leases),
        data=st.data(), delay=st.sampled_from([0, SHORT, LONG]))
    def handler_timeout(self, data: st.DataObject, delay: int) -> None:
        """A handler past its timeout: the real handler call gives a HandlerTimeout failure,
        written at once with the fenced retry, so the job leaves active without an expiry."""
        self._time_out(data.draw(st.sampled_from(
            [x for x in self.leases if self.ref.live(x.id, x.attempt)])), delay)

    @op(4, when=lambda self: self.live() < CAP or any(
            self.ref.live(x.id, x.attempt) and x.timeout_ms is not None for x in self.leases),
        data=st.data(), delay=st.sampled_from([0, SHORT, LONG]))
    def job_timeout(self, data: st.DataObject, delay: int) -> None:
        """The same with a lease of a job admitted with its own timeout: one that holds, or
        else a job admitted with its own timeout and claimed now (waiting for such a lease
        to turn up, "job's own timeout handed back" was missed by one round in three)."""
        held = [x for x in self.leases if self.ref.live(x.id, x.attempt) and x.timeout_ms is not None]
        if not held:
            jid, timeout = generate("JOB"), data.draw(st.sampled_from([1, 5]))
            assert self.q.admit(jid, jid.encode(), timeout_ms=timeout) is Verdict.ENQUEUED
            self.ref.admit(jid, jid.encode(), timeout=timeout)
            held = self._claim_exactly(jid, LONG)
            if not held:  # the claim gate held it back: it waits pending, as the model says
                return
        self._time_out(data.draw(st.sampled_from(held)), delay)

    def _time_out(self, lease: Lease, delay: int) -> None:
        async def stuck() -> None:
            await asyncio.Event().wait()

        # The job's own timeout (1 or 5 ms, given at admission) in preference to the
        # consumer's (1 ms here), as the consumer chooses it.
        limit = timeout_for(lease, 1)
        assert limit == (self.ref.jobs[lease.id].timeout or 1)
        outcome = asyncio.run(call_handler(stuck, lease, timeout_ms=limit, hooks=Hooks(), who="model"))
        assert isinstance(outcome, Backoff)
        error = parse_failure(outcome.error)
        assert error.type == "HandlerTimeout" and f"past its timeout of {limit} ms" in error.message
        t0 = self.now()
        got = self.q.retry(lease, delay_ms=delay, error=outcome.error)
        t1 = self.now()
        assert got is self.ref.retry(lease.id, lease.attempt, True, delay > 0, (t0, t1))
        assert got is not RetryOutcome.STALE
        if got is RetryOutcome.SCHEDULED and delay:
            self._delayed(lease.id, delay, t0, t1)
        q = self.queue_of(lease.id)
        assert self.raw.zscore(q.keys["active"], lease.id) is None  # the lease is back now
        if got is not RetryOutcome.CANCELLED:  # a job asked to stop ends cancelled instead
            assert parse_failure(self.raw.hget(q.job_key(lease.id), "error")).type == "HandlerTimeout"
        self.ref.seen["handler timeout handed back"] += 1
        if lease.timeout_ms is not None:
            self.ref.seen["job's own timeout handed back"] += 1

    @op(2, when=lambda self: self.live() < CAP, data=st.data(), back=st.integers(0, 3),
        ahead=st.integers(1, 2), behind=st.integers(0, 3))
    def schedule_ticks(self, data: st.DataObject, back: int, ahead: int, behind: int) -> None:
        """A schedule's ticks: only those after its mark and not after the server's TIME are
        admitted (ticks re-asked below the mark stay refused, also after their rows are gone)."""
        if self.tick_offset is None:  # the server clock half a tick from a boundary: what is
            self.tick_offset = (self.now() + TICK // 2) % TICK  # due cannot change mid-example
        queue = self.q.name
        sched = Schedule(name="model", queue=queue, every_ms=TICK, offset_ms=self.tick_offset,
                         payload=b"tick")
        mark = self.marks.get(queue)
        if mark is None:
            floor = sched.latest(self.now()) - back * TICK
            mark = decode_schedule(self.conn.run(sched.call([], floor=floor))).mark
            assert mark == floor
        latest = sched.latest(self.now())
        ticks = [t for t in range(mark - behind * TICK, latest + (ahead + 1) * TICK, TICK) if t >= 0]
        got = decode_schedule(self.conn.run(sched.call(ticks)))
        want = [t for t in ticks if mark < t <= got.now_ms]
        assert got.admitted == [sched.job_id(t) for t in want], (mark, ticks, got)
        assert got.mark == (want[-1] if want else mark)
        for t in want:
            assert self.ref.admit(sched.job_id(t), b"tick")
        self.marks[queue] = got.mark
        self.ref.seen["schedule ticks admitted"] += bool(want)
        self.ref.seen["schedule ticks below the mark refused"] += bool(behind)
        self.ref.seen["schedule tick not due refused"] += 1
    # --------------------------------------------------------------- claim gate
    @op(when=lambda self: self.gated() and self.live() < CAP - 1)
    def lane_burst(self) -> None:
        """A lane limit of 1 and two fresh jobs on one lane: one claim leases the first and
        holds the second back (its wait is the lane's window, or the token's due time).
        A paused queue is resumed first (waiting for one left the step out of some rounds)."""
        if self.ref.paused:
            self.resume()
        most = self.ref.rate[0] if self.ref.rate else None
        self.set_limits(most, 1)
        for _ in range(2):
            jid = generate("JOB")
            assert self.q.admit(jid, jid.encode(), lane="g") is Verdict.ENQUEUED
            self.ref.admit(jid, jid.encode(), "g")
        self._claim(CAP, LONG)

    @op(2, when=lambda self: self.gated() and self.with_history and self.ref.vtime <= PRIORITY_AGE,
        lane=st.sampled_from(["f", "g"]))
    def history(self, lane: str) -> None:
        """1,050 jobs through lane h (admitted, claimed, completed): the lanes' virtual time
        passes AGE, where a plain job scored 0 used to overtake a level-1 job; then that
        comparison at once (``plain_versus_laned`` at level 1), which the random steps
        after a history reached about once in three rounds of examples. The gate is opened
        first (waiting for an open one, the step ran twice in some rounds)."""
        self.open_gate()
        jobs = [generate("JOB") for _ in range(PRIORITY_AGE + 50)]
        assert set(self.q.admit_many([(i, b"", "h") for i in jobs])) == {Verdict.ENQUEUED}
        for i in jobs:
            self.ref.admit(i, b"", "h")
        mine = set(jobs)
        while mine & set(self.ref.ids("pending")):
            got = [x for x in self._claim(600, LONG, window=1300) if x.id in mine]
            t0 = self.now()
            assert self.q_drop.complete_many(got) == [Completion.COMPLETED] * len(got)
            t1 = self.now()
            for x in got:
                self.ref.complete(x.id, x.attempt, False, (t0, t1))
            self.leases = [x for x in self.leases if x.id not in mine]
        self.ref.seen["history past AGE"] += 1
        # at once, whatever the live count (three jobs past CAP for a step: guarded by it, the
        # comparison followed a history about once in ten, and a round now and then missed it)
        self.plain_versus_laned(1, lane)

    @op(2, when=lambda self: self.gated() and self.live() < CAP - 3 and not self.ref.paused,
        prio=st.integers(1, 3), lane=st.sampled_from(["f", "g"]))
    def plain_versus_laned(self, prio: int, lane: str) -> None:
        """A plain level-0 job, then level-``prio`` jobs without and with a lane: one claim of
        three, in the model's order (the rule of include/pend.lua on the same virtual time)."""
        plain, unlaned, laned = (generate("JOB") for _ in range(3))
        assert self.q.enqueue(plain, plain.encode()) is Verdict.ENQUEUED
        self.ref.admit(plain, plain.encode())
        for jid, ln in ((unlaned, None), (laned, lane)):
            assert self.q.admit(jid, jid.encode(), lane=ln, priority=prio) is Verdict.ENQUEUED
            self.ref.admit(jid, jid.encode(), ln, prio=prio)
        self._claim(3, LONG)
        if self.ref.vtime > prio * PRIORITY_AGE:
            self.ref.seen["plain versus laned after history"] += 1

    @op(when=lambda self: self.gated() and self.live() < CAP - 2, most=st.integers(1, 2))
    def queue_burst(self, most: int) -> None:
        """A queue limit of ``most`` and ``most`` + 1 fresh jobs: one claim leases at most
        ``most`` (fewer when the window already holds leases) and holds the rest back (a
        paused queue resumed first)."""
        if self.ref.paused:
            self.resume()
        self.set_limits(most, self.ref.lane_rate[0] if self.ref.lane_rate else None)
        for _ in range(most + 1):
            jid = generate("JOB")
            assert self.q.admit(jid, jid.encode()) is Verdict.ENQUEUED
            self.ref.admit(jid, jid.encode())
        got = self._claim(CAP, LONG)
        assert len(got) <= most and self.ref.held, (got, self.ref.held)

    @op(2, when=lambda self: self.gated() and not self.ref.paused)
    def pause(self) -> None:
        assert self.q.pause().paused
        self.ref.paused = True

    @op(3, when=lambda self: self.gated() and self.ref.paused)
    def resume(self) -> None:
        assert not self.q.resume().paused
        self.ref.paused = False

    @op(2, when=lambda self: self.gated(), most=st.sampled_from([None, None, 1, 2, 3]),
        lane_most=st.sampled_from([None, None, 1, 2]))
    def set_limits(self, most: int | None, lane_most: int | None) -> None:
        """Rate limits for the queue and per lane (this example's window)."""
        rate = RateLimit(most, self.window) if most else None
        lane_rate = RateLimit(lane_most, self.window) if lane_most else None
        got = self.q.set_limits(rate=rate, lane_rate=lane_rate)
        assert got == Gate(paused=self.ref.paused, rate=rate, lane_rate=lane_rate)
        self.ref.set_limits(most and (most, self.window), lane_most and (lane_most, self.window))

    # ------------------------------------------- cancellation, progress, results
    @op(when=lambda self: self.ref.jobs, data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        """Cancel some known ids (any state; active and delayed ones most often) and an
        unknown one: one outcome each, in order, in one script."""
        known = sorted(self.ref.jobs)
        # Active, delayed or any known job, a third each when there are some: drawn from all
        # known ones alone, a delayed job was picked so seldom that "cancelled delayed" was
        # missed by one round in three.
        groups = [g for g in ([i for i in known if self.ref.jobs[i].state == s]
                              for s in ("active", "delayed")) if g] + [known]
        pool = st.sampled_from(data.draw(st.sampled_from(groups)))
        ids = data.draw(st.lists(pool, min_size=1, max_size=3, unique=True))
        if data.draw(st.booleans()):
            ids.append(generate("JOB"))
        t0 = self.now()
        got = self.q.cancel(ids)
        t1 = self.now()
        assert got == self.ref.cancel(ids, (t0, t1))
        assert all(o is not CancelOutcome.LEFT for o, i in zip(got, ids, strict=True)
                   if i in self.ref.jobs and self.ref.jobs[i].state in ("pending", "delayed"))

    @op(when=lambda self: self.live() < CAP, lane=st.sampled_from(LANES),
        delay=st.sampled_from([SHORT, LONG]))
    def cancel_delayed(self, lane: str | None, delay: int) -> None:
        """A delayed job, cancelled before it is due (or due, not yet promoted): it ends
        cancelled, never pending (the cancel step drew a delayed job too seldom: about four
        times a round, none in one round of three)."""
        jid = generate("JOB")
        t0 = self.now()
        got = self.q.admit(jid, jid.encode(), lane=lane, serial=lane == "s", delay_ms=delay)
        t1 = self.now()
        assert got is Verdict.ENQUEUED
        self.ref.admit(jid, jid.encode(), lane, lane == "s", delayed=True)
        self._delayed(jid, delay, t0, t1)
        with pytest.raises(ResultTimeout):  # its waiter, before and after: not ended, then cancelled
            self.q.result(jid, timeout=0)
        self.ref.seen["result not ended"] += 1
        t0 = self.now()
        assert self.q.cancel([jid]) == self.ref.cancel([jid], (t0, self.now()))
        assert self.ref.jobs[jid].state == "cancelled"
        with pytest.raises(JobCancelled):
            self.q.result(jid, timeout=0)
        self.ref.seen["result cancelled"] += 1

    @op(when=lambda self: self.gated() and self.live() < CAP, short=st.booleans(),
        pause=st.booleans())
    def drain_then_park(self, short: bool, pause: bool) -> None:
        """Cancel what is pending, then the hand-off step (a consumer parked on the empty
        queue): that step needs an empty pending set, which the other steps leave about a
        dozen times a round, so "hand-off held" was missed now and then."""
        pending = self.ref.ids("pending")
        if pending:
            t0 = self.now()
            assert self.q.cancel(pending) == self.ref.cancel(pending, (t0, self.now()))
        self.park_then_enqueue(short, pause)

    @op(when=lambda self: self.live() < CAP, data=st.data(), lane=st.sampled_from(LANES),
        ends=st.permutations(["complete", "complete_many", "retry", "defer", "reap"]))
    def cancel_running(self, data: st.DataObject, lane: str | None, ends: list[str]) -> None:
        """For each way an attempt ends, a job of its own: claim it, ask it to stop, see its
        beat and its progress report say so, end the attempt that way: the job ends
        cancelled whichever way, never done nor run again, and its result says so."""
        for end in ends:
            self._cancel_running(data, lane, end)

    def _cancel_running(self, data: st.DataObject, lane: str | None, end: str) -> None:
        jid = generate("JOB")
        assert self.q.admit(jid, jid.encode(), lane=lane, serial=lane == "s") is Verdict.ENQUEUED
        self.ref.admit(jid, jid.encode(), lane, lane == "s")
        leases = self._claim_exactly(jid, LONG)
        if not leases:  # its serial lane is held by another job: cancel it while it waits
            t0 = self.now()
            assert self.q.cancel([jid]) == self.ref.cancel([jid], (t0, self.now()))
            return
        lease = leases[0]
        report = data.draw(st.binary(max_size=4))
        assert self.q.report_progress(lease, report) is self.ref.progress(lease.id, lease.attempt, report)
        t0 = self.now()
        assert self.q.cancel([lease.id]) == [CancelOutcome.ASKED]
        self.ref.cancel([lease.id], (t0, self.now()))
        beat = self.q.heartbeat(lease, lease_ms=LONG)
        assert beat is not None and beat.cancel
        self.ref.jobs[lease.id].deadline = beat
        assert self.q.report_progress(lease, report) is ProgressOutcome.STOP
        assert self.ref.progress(lease.id, lease.attempt, report) is ProgressOutcome.STOP
        t0 = self.now()
        if end == "complete":
            got: object = self.q.complete(lease, b"ignored")
            assert got is self.ref.complete(lease.id, lease.attempt, True, (t0, self.now()))
        elif end == "complete_many":
            got = self.q.complete_many([lease])
            assert got == [self.ref.complete(lease.id, lease.attempt, True, (t0, self.now()))]
        elif end in ("retry", "defer"):
            self._retry(lease, end == "retry", data.draw(st.sampled_from([0, SHORT])))
        else:
            beat = self.q.heartbeat(lease, lease_ms=SHORT)
            assert beat is not None
            self.wait_past(beat)
            self.ref.jobs[lease.id].deadline, self.ref.jobs[lease.id].expired = beat, True
            self._reap()
        assert self.ref.jobs[lease.id].state == "cancelled"
        self.ref.seen["result cancelled"] += 1
        with pytest.raises(JobCancelled):
            self.q.result(lease.id, timeout=0)

    @op(when=lambda self: self.leases, data=st.data())
    def progress(self, data: st.DataObject) -> None:
        lease = self.pick(data)
        report = data.draw(st.binary(max_size=8))
        expect = self.ref.progress(lease.id, lease.attempt, report)
        assert self.q.report_progress(lease, report) is expect

    @op(when=lambda self: self.ref.jobs or self.ref.gone, data=st.data())
    def result(self, data: st.DataObject) -> None:
        """Read a result once (timeout 0): done gives the bytes, dead its error, cancelled
        says so, not ended is a timeout, a deleted row is not found."""
        groups = [g for g in ([i for i, j in self.ref.jobs.items() if j.state == "done"],
                              sorted(self.ref.jobs), sorted(self.ref.gone)) if g]
        jid = data.draw(st.sampled_from(data.draw(st.sampled_from(groups))))
        job = self.ref.jobs.get(jid)
        if job is None:
            with pytest.raises(JobNotFound):
                self.q.result(jid, timeout=0)
            return
        expect: type[Exception] | None = {"dead": JobFailed, "cancelled": JobCancelled,
                                          "expired": JobExpired,
                                          "done": None}.get(job.state, ResultTimeout)
        ended = job.state in ("done", "dead", "cancelled", "expired")
        self.ref.seen[f"result {job.state if ended else 'not ended'}"] += 1
        if expect is None:
            assert self.q.result(jid, timeout=0) == (job.result or b"")
        else:
            with pytest.raises(expect):
                self.q.result(jid, timeout=0)

    # ------------------------------------------------------------------ upkeep
    def _reap(self) -> tuple[int, int]:
        t0 = self.now()
        got = self.q.reap()
        t1 = self.now()
        requeued, dead, cancelled = self.ref.reap((t0, t1))
        assert got == (requeued, dead) and got.cancelled == cancelled  # type: ignore[attr-defined]
        return got

    @op(2)
    def reap(self) -> None:
        self._reap()

    @op(3)
    def promote(self) -> None:
        assert self.q.promote() == self.ref.promote()

    @op(2, when=lambda self: self.live() < CAP, lane=st.sampled_from(LANES),
        prio=st.sampled_from([0, 3]))
    def late_claim(self, lane: str | None, prio: int) -> None:
        """A job whose deadline passed before any claim met it: the claim that meets it ends
        it expired in its own step and leases nothing (waiting for the reaper instead, a
        claim that leased it was caught in only 2 of 5 runs)."""
        jid = generate("JOB")
        t0 = self.now()
        got = self.q.admit(jid, jid.encode(), lane=lane, serial=lane == "s", priority=prio,
                           expires_ms=EXP_SHORT)
        t1 = self.now()
        assert got is Verdict.ENQUEUED
        self.ref.admit(jid, jid.encode(), lane, lane == "s", prio=prio)
        exp = _int(self.raw.hget(self.queue_of(jid).job_key(jid), "exp"))
        assert t0 + EXP_SHORT <= exp <= t1 + EXP_SHORT, (t0, exp, t1)
        self.wait_past(exp)
        self.ref.set_deadline(jid, exp, True)
        assert self._claim_exactly(jid, LONG) == []
        assert self.ref.jobs[jid].state == "expired"
        # its waiter learns it at once (the label the result step reached about once in
        # three rounds on the cluster, each round ~30 s)
        with pytest.raises(JobExpired):
            self.q.result(jid, timeout=0)
        self.ref.seen["result expired"] += 1

    @op(when=lambda self: self.live() < CAP, lane=st.sampled_from(LANES),
        delay=st.sampled_from([0, SHORT]))
    def late_reap(self, lane: str | None, delay: int) -> None:
        """A job whose deadline passed before any claim met it, then the expiry reaper: it
        ends the job expired (the reaper among the other steps met such a job about twice
        a round, and a round now and then never did)."""
        jid = generate("JOB")
        t0 = self.now()
        got = self.q.admit(jid, jid.encode(), lane=lane, serial=lane == "s", delay_ms=delay,
                           expires_ms=EXP_SHORT)
        t1 = self.now()
        assert got is Verdict.ENQUEUED
        self.ref.admit(jid, jid.encode(), lane, lane == "s", delayed=delay > 0)
        exp = _int(self.raw.hget(self.queue_of(jid).job_key(jid), "exp"))
        assert t0 + EXP_SHORT <= exp <= t1 + EXP_SHORT, (t0, exp, t1)
        self.wait_past(exp)
        self.ref.set_deadline(jid, exp, True)
        if delay:  # due before its deadline (SHORT < EXP_SHORT): ripe, never promoted
            self._delayed(jid, delay, t0, t1)
        self.expire()
        assert self.ref.jobs[jid].state == "expired"

    @op(2, when=lambda self: self.live() < CAP, delay=st.sampled_from([0, LONG]))
    def deadline_kept(self, delay: int) -> None:
        """A job whose deadline is far off, then the reaper: it leaves the job waiting (with
        the reaper only among the other steps, one that expired it early was caught in 2 of
        5 runs)."""
        jid = generate("JOB")
        t0 = self.now()
        got = self.q.admit(jid, jid.encode(), delay_ms=delay, expires_ms=EXP_LONG)
        t1 = self.now()
        assert got is Verdict.ENQUEUED
        self.ref.admit(jid, jid.encode(), delayed=delay > 0)
        exp = _int(self.raw.hget(self.queue_of(jid).job_key(jid), "exp"))
        assert t0 + EXP_LONG <= exp <= t1 + EXP_LONG, (t0, exp, t1)
        self.ref.set_deadline(jid, exp, False)
        if delay:
            self._delayed(jid, delay, t0, t1)
        self.expire()
        assert self.ref.jobs[jid].state == ("delayed" if delay else "pending")

    @op(3)
    def expire(self) -> None:
        """The expiry reaper: waiting jobs past their deadline end expired, none before."""
        t0 = self.now()
        got = self.q.expire()
        t1 = self.now()
        assert got == self.ref.expire(self.q.options.reap_batch, (t0, t1))

    @op(limit=st.integers(1, 4))
    def requeue_dead(self, limit: int) -> None:
        assert self.q.requeue_dead(limit=limit) == self.ref.requeue_dead(limit)

    @op(when=lambda self: bool(self.ref.ids("dead")), limit=st.integers(1, 4))
    def requeue_some_dead(self, limit: int) -> None:
        """The same call when some job is dead, so it requeues at least one (drawn among the
        other steps, it met an empty dead set often: "dead requeued" 6-10 times a round)."""
        before = self.ref.seen["dead requeued"]
        self.requeue_dead(limit)
        assert self.ref.seen["dead requeued"] > before

    @op(limit=st.integers(1, 4))
    def purge_dead(self, limit: int) -> None:
        assert self.q.purge_dead(limit=limit) == self.ref.purge("dead", limit)

    @op(3, expire=st.booleans())
    def trim(self, expire: bool) -> None:
        """Retention: rows younger than their keep window stay; older ones go."""
        assert self.q.trim() == 0
        self.ref.seen["retention kept young rows"] += any(
            j.state in ("done", "dead") for j in self.ref.jobs.values())
        if not expire:
            return
        times = [j.at[1] for j in self.ref.jobs.values()
                 if j.state in ("done", "dead", "cancelled", "expired")]
        if times:
            self.wait_past(max(times) + 1)
        batch = self.q_short.options.reap_batch
        expect = sum(self.ref.purge(s, batch) for s in ("done", "dead", "expired"))
        assert self.q_short.trim() == expect

    # ------------------------------------------------------- the version fence
    @op(data=st.data(), call=st.sampled_from(["enqueue", "admit", "claim", "settle", "finish",
                                               "upkeep"]))
    def foreign_version(self, data: st.DataObject, call: str) -> None:
        """A client of another major version recorded itself in the queue's meta: every
        transition is refused with ProtocolVersionError and writes nothing (the invariant
        compares the whole queue with the model after this step). The meta is then put
        back, as if that client had never come."""
        meta = self.q.keys["meta"]
        mine = self.raw.hget(meta, "protocol")
        self.raw.hset(meta, "protocol", "echomq:99.0.0")
        try:
            try:
                if call == "enqueue":
                    self.q.enqueue(generate("JOB"), b"foreign")
                elif call == "admit":
                    self.q.admit(generate("JOB"), b"foreign", lane="f", delay_ms=SHORT)
                elif call == "claim":
                    self.q.claim(2, lease_ms=LONG)
                elif call == "settle":
                    finished = [(self.pick(data), b"r")] if self.leases else []
                    self.q.settle(finished, count=2, lease_ms=LONG,
                                  candidates=[i.encode() for i in self.ref.ids("pending")[:4]] or [b"x"],
                                  window=2)
                elif call == "finish" and self.leases:
                    lease = self.pick(data)
                    how = data.draw(st.sampled_from(["heartbeat", "complete", "retry"]))
                    if how == "heartbeat":
                        self.q.heartbeat(lease, lease_ms=LONG)
                    elif how == "complete":
                        self.q.complete(lease, b"r")
                    else:
                        self.q.retry(lease, delay_ms=0, error="foreign")
                else:
                    how = data.draw(st.sampled_from(["reap", "promote", "trim", "purge_dead",
                                                     "requeue_dead"]))
                    if how in ("purge_dead", "requeue_dead"):
                        getattr(self.q, how)(limit=4)
                    else:
                        getattr(self.q, how)()
            except ProtocolVersionError:
                self.ref.seen["version fence refused"] += 1
            else:
                raise AssertionError(f"{call}: another major version's queue was not refused")
        finally:
            if mine is None:
                self.raw.hdel(meta, "protocol")
            else:
                self.raw.hset(meta, "protocol", mine)

    # --------------------------------------------------------------- the check
    @invariant()
    def server_matches_model(self) -> None:
        ref, k = self.ref, self.q.keys
        ids = sorted(ref.jobs)
        gone = sorted(ref.gone | self.refused)
        pipe = self.raw.pipeline(transaction=False)
        for state in _SETS:
            pipe.zrange(k[state], 0, -1, withscores=True)
        pipe.hgetall(k["lanes"])
        pipe.hgetall(k["inflight"])
        pipe.hget(k["meta"], "vtime")
        pipe.zrange(k["expiring"], 0, -1, withscores=True)
        for jid in ids:
            pipe.hgetall(self.q.job_key(jid))
        for jid in gone:
            pipe.exists(f"{self.q._job_prefix}{jid}")
        replies = pipe.execute()
        sets = {s: {m.decode(): _int(v) for m, v in replies[i]} for i, s in enumerate(_SETS)}
        n = len(_SETS)
        lanes, inflight, vtime, index = replies[n], replies[n + 1], replies[n + 2], replies[n + 3]
        rows = dict(zip(ids, replies[n + 4: n + 4 + len(ids)], strict=True))
        assert not any(replies[n + 4 + len(ids):]), "a deleted or refused id has a row"
        # the expiring index: exactly the model's (decision 0045)
        assert {m.decode(): _int(v) for m, v in index} == {i: e for i, (e, _) in ref.index.items()}
        for state, members in sets.items():
            assert sorted(members) == ref.members(state), state
            ref.seen[state] += bool(members)
        for jid, job in ref.jobs.items():
            row = {f.decode(): v.decode() for f, v in rows[jid].items()
                   if f not in (b"payload", b"progress", b"result")}
            # A done or cancelled row drops its payload (decisions 0010, 0023); others keep it.
            assert rows[jid].get(b"payload") == (
                None if job.state in ("done", "cancelled") else job.payload)
            assert rows[jid].get(b"result") == job.result, (jid, job)
            assert rows[jid].get(b"progress") == job.progress, (jid, job)
            assert (b"cancel" in rows[jid]) == job.cancel, (jid, job)
            assert row["state"] == job.state, (jid, row, job)
            assert int(row["attempts"]) == job.attempts, (jid, row, job)
            assert int(row.get("failures", 0)) == job.failures, (jid, row, job)
            assert row.get("lane") == job.lane
            assert row.get("timeout") == (None if job.timeout is None else str(job.timeout))
            assert row.get("exp") == (None if job.exp is None else str(job.exp)), (jid, row, job)
            score = sets[SET_OF[job.state]][jid]
            if job.state == "pending":
                assert score == job.score, (jid, score, job)
            elif job.state == "active":
                assert score == job.deadline
            elif job.state == "delayed":
                assert job.due_known and score == job.due, (jid, score, job)
            elif job.state in ("done", "dead", "cancelled", "expired"):
                assert job.at[0] <= score <= job.at[1], (jid, score, job)
                job.at_exact = score
        assert {a.decode(): _int(b) for a, b in lanes.items()} == ref.lanes
        assert {a.decode(): b.decode() for a, b in inflight.items()} == ref.inflight
        assert _int(vtime or 0) == ref.vtime
        gate = self.q.gate()
        assert (gate.paused, gate.rate and (gate.rate.max, gate.rate.per_ms),
                gate.lane_rate and (gate.lane_rate.max, gate.lane_rate.per_ms)) == (
                    ref.paused, ref.rate, ref.lane_rate)
        if self.window == LONG:  # the logs hold exactly the model's lease times
            qlog = [_int(t) for t in self.raw.lrange(k["rate"], 0, -1)]
            assert qlog == ref.qlog, (qlog, ref.qlog)
            logs = {a.decode(): [int(t) for t in b.split()]
                    for a, b in self.raw.hgetall(k["lane_rate"]).items()}
            assert logs == ref.llog, (logs, ref.llog)
        stats = self.q.stats()
        assert (stats.pending, stats.active, stats.delayed, stats.done, stats.dead,
                stats.expired) == tuple(len(ref.members(s)) for s in _SETS)
