"""A model-based test: random interleavings of every transition against a real server,
checked step by step against a small pure-Python model of the protocol.

Time is driven on purpose: a lease "expires" by moving its deadline to 0 and a delayed
job "becomes due" likewise, so the server's clock never races the model.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import hypothesis.strategies as st
import pytest
import redis
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from echomq import Completion, Connector, Lease, Queue, QueueOptions, RetryOutcome, Verdict, generate
from tests.echomq.invariants import assert_consistent

MAX_ATTEMPTS = 3
LONG = 600_000
_names = itertools.count()


@dataclass
class Job:
    state: str = "pending"
    attempts: int = 0
    failures: int = 0


@dataclass
class Model:
    jobs: dict[str, Job] = field(default_factory=dict)

    def pending_in_order(self) -> list[str]:
        return sorted(i for i, j in self.jobs.items() if j.state == "pending")

    def holds(self, lease: Lease) -> bool:
        job = self.jobs[lease.id]
        return job.state == "active" and job.attempts == lease.attempt


class QueueMachine(RuleBasedStateMachine):
    url: str = ""

    def __init__(self) -> None:
        super().__init__()
        self.raw = redis.Redis.from_url(self.url)
        self.conn = Connector.from_url(self.url)
        self.name = f"model-{next(_names)}"
        self.q = Queue(self.conn, self.name,
                       options=QueueOptions(max_attempts=MAX_ATTEMPTS, keep_done_ms=LONG))
        self.model = Model()
        self.leases: list[Lease] = []

    def teardown(self) -> None:
        self.conn.close()
        self.raw.close()

    def _key(self, name: str) -> str:
        return f"emq:{{{self.name}}}:{name}"

    @rule()
    def enqueue_new(self) -> None:
        jid = generate("JOB")
        assert self.q.enqueue(jid, jid.encode()) is Verdict.ENQUEUED
        self.model.jobs[jid] = Job()

    @precondition(lambda self: self.model.jobs)
    @rule(data=st.data())
    def enqueue_duplicate(self, data: st.DataObject) -> None:
        jid = data.draw(st.sampled_from(sorted(self.model.jobs)))
        assert self.q.enqueue(jid, b"other") is Verdict.DUPLICATE

    @rule(n=st.integers(1, 4))
    def claim(self, n: int) -> None:
        expect = self.model.pending_in_order()[:n]
        got = self.q.claim(n, lease_ms=LONG)
        assert [x.id for x in got] == expect
        for lease in got:
            job = self.model.jobs[lease.id]
            job.state, job.attempts = "active", job.attempts + 1
            assert lease.attempt == job.attempts and lease.payload == lease.id.encode()
        self.leases += got

    @precondition(lambda self: self.leases)
    @rule(data=st.data())
    def heartbeat(self, data: st.DataObject) -> None:
        lease = data.draw(st.sampled_from(self.leases))
        alive = self.q.heartbeat(lease, lease_ms=LONG) is not None
        assert alive == self.model.holds(lease)

    @precondition(lambda self: self.leases)
    @rule(data=st.data())
    def complete(self, data: st.DataObject) -> None:
        lease = data.draw(st.sampled_from(self.leases))
        holds = self.model.holds(lease)
        got = self.q.complete(lease)
        assert got is (Completion.COMPLETED if holds else Completion.STALE)
        if holds:
            self.model.jobs[lease.id].state = "done"

    @precondition(lambda self: self.leases)
    @rule(data=st.data(), mode=st.sampled_from(["fail", "defer"]), later=st.booleans())
    def retry(self, data: st.DataObject, mode: str, later: bool) -> None:
        lease = data.draw(st.sampled_from(self.leases))
        holds = self.model.holds(lease)
        delay = LONG if later else 0
        if mode == "fail":
            got = self.q.retry(lease, delay_ms=delay, error="e")
        else:
            got = self.q.defer(lease, delay_ms=delay)
        if not holds:
            assert got is RetryOutcome.STALE
            return
        job = self.model.jobs[lease.id]
        if mode == "fail":
            job.failures += 1
        if job.failures >= MAX_ATTEMPTS:
            job.state = "dead"
            assert got is RetryOutcome.DEAD
        else:
            job.state = "delayed" if later else "pending"
            assert got is RetryOutcome.SCHEDULED

    @precondition(lambda self: any(j.state == "active" for j in self.model.jobs.values()))
    @rule(data=st.data())
    def expire_lease(self, data: st.DataObject) -> None:
        jid = data.draw(st.sampled_from(sorted(i for i, j in self.model.jobs.items()
                                               if j.state == "active")))
        self.raw.zadd(self._key("active"), {jid: 0}, xx=True)
        self.model.jobs[jid].state = "expired"  # still active on the server until reaped

    @rule()
    def reap(self) -> None:
        expired = [i for i, j in self.model.jobs.items() if j.state == "expired"]
        requeued = dead = 0
        for jid in expired:
            job = self.model.jobs[jid]
            job.failures += 1
            if job.failures >= MAX_ATTEMPTS:
                job.state, dead = "dead", dead + 1
            else:
                job.state, requeued = "pending", requeued + 1
        assert self.q.reap() == (requeued, dead)

    @precondition(lambda self: any(j.state == "delayed" for j in self.model.jobs.values()))
    @rule(data=st.data())
    def become_due(self, data: st.DataObject) -> None:
        jid = data.draw(st.sampled_from(sorted(i for i, j in self.model.jobs.items()
                                               if j.state == "delayed")))
        self.raw.zadd(self._key("delayed"), {jid: 0}, xx=True)
        self.model.jobs[jid].state = "due"

    @rule()
    def promote(self) -> None:
        due = [i for i, j in self.model.jobs.items() if j.state == "due"]
        for jid in due:
            self.model.jobs[jid].state = "pending"
        assert self.q.promote() == len(due)

    @rule()
    def requeue_dead(self) -> None:
        dead = [i for i, j in self.model.jobs.items() if j.state == "dead"]
        for jid in dead:
            self.model.jobs[jid].state, self.model.jobs[jid].failures = "pending", 0
        assert self.q.requeue_dead() == len(dead)

    @invariant()
    def server_matches_model(self) -> None:
        where = assert_consistent(self.raw, self.name)
        server_view = {"expired": "active", "due": "delayed"}
        expect = {i: server_view.get(j.state, j.state) for i, j in self.model.jobs.items()}
        assert where == expect
        for jid, job in self.model.jobs.items():
            attempts = self.raw.hget(self._key(f"job:{jid}"), "attempts")
            assert attempts == str(job.attempts).encode()
        stats = self.q.stats()
        assert stats.total == len(self.model.jobs)


@pytest.mark.timeout(600)
def test_protocol_matches_its_model(valkey_url: str) -> None:
    QueueMachine.url = valkey_url
    run = settings(max_examples=40, stateful_step_count=40, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow])(QueueMachine)
    run.TestCase().runTest()
