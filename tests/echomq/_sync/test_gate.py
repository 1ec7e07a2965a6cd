# Generated from tests/echomq/_async/test_gate.py by scripts/unasync_gen.py. Do not edit.
"""The claim gate through the queue API: pause/resume, rate limits per queue and per lane,
priorities with fair lanes, bad arguments refused before any write (docs/decisions/0022).
On both topologies and both APIs (written once for asyncio; the blocking copy is
generated). Competing claimers and consumers, and aging past a flood:
tests/echomq/test_claim_gate.py."""

from __future__ import annotations

import pytest
import redis

from echomq import InvalidArgument, Queue, Verdict, generate
from echomq.protocol.gate import Gate, RateLimit
from echomq.protocol.scripts import bundle
from tests.echomq.invariants import assert_consistent

LONG = 600_000


def jid() -> str:
    return generate("JOB")


def test_a_paused_queue_admits_but_leases_nothing_until_resumed(
        queue: Queue, raw: redis.Redis) -> None:
    first = [jid() for _ in range(3)]
    queue.enqueue_many([(i, b"x") for i in first])
    assert queue.pause() == Gate(paused=True, rate=None, lane_rate=None)
    later = jid()
    assert queue.admit(later, b"y", lane="l") is Verdict.ENQUEUED  # admissions go on
    got = queue.claim(10, lease_ms=LONG)
    assert got == [] and got.paused and got.wait_ms is None
    _, leases, _ = queue.settle([], count=4, lease_ms=LONG, candidates=[i.encode() for i in first],
                                      window=4)
    assert leases == [] and leases.paused
    rows = assert_consistent(raw, queue.name)
    assert set(rows.values()) == {"pending"} and len(rows) == 4  # no attempt was counted
    assert all(raw.hget(queue.job_key(i), "attempts") == b"0" for i in [*first, later])
    assert (queue.gate()).paused
    assert queue.resume() == Gate(paused=False, rate=None, lane_rate=None)
    got = queue.claim(10, lease_ms=LONG)
    assert sorted(x.id for x in got) == sorted([*first, later]) and not got.paused


def test_a_queue_rate_limit_holds_jobs_back_without_counting_an_attempt(
        queue: Queue, raw: redis.Redis) -> None:
    queue.set_limits(rate=RateLimit(3, LONG))
    ids = [jid() for _ in range(8)]
    queue.enqueue_many([(i, b"x") for i in ids])
    got = queue.claim(8, lease_ms=LONG)
    assert [x.id for x in got] == ids[:3]
    assert got.wait_ms is not None and LONG - 5_000 < got.wait_ms <= LONG  # the first token's due
    again = queue.claim(8, lease_ms=LONG)
    assert again == [] and again.wait_ms is not None and not again.paused
    rows = assert_consistent(raw, queue.name)
    assert [i for i in ids if rows[i] == "pending"] == ids[3:]
    assert all(raw.hget(queue.job_key(i), "attempts") == b"0" for i in ids[3:])
    assert queue.set_limits() == Gate(paused=False, rate=None, lane_rate=None)
    assert [x.id for x in queue.claim(8, lease_ms=LONG)] == ids[3:]  # limit removed


def test_a_lane_rate_limit_holds_one_lane_and_serves_the_others(queue: Queue) -> None:
    queue.set_limits(lane_rate=RateLimit(1, LONG))
    a = [jid() for _ in range(3)]
    b = [jid() for _ in range(3)]
    queue.admit_many([(i, b"", "a") for i in a] + [(i, b"", "b") for i in b])
    plain = jid()
    queue.enqueue(plain, b"")  # a job without a lane has no lane limit
    got = queue.claim(10, lease_ms=LONG)
    assert sorted(x.id for x in got) == sorted([plain, a[0], b[0]])
    assert got.wait_ms is not None and got.wait_ms > LONG - 5_000
    assert queue.claim(10, lease_ms=LONG) == []


def test_a_higher_priority_is_claimed_first_and_lanes_stay_fair_within_it(
        queue: Queue) -> None:
    low = [jid() for _ in range(4)]
    queue.admit_many([(i, b"", "x") for i in low])
    high = {lane: [jid() for _ in range(3)] for lane in ("a", "b")}
    for lane in ("a", "b"):
        for i in high[lane]:
            queue.admit(i, b"", lane=lane, priority=2)
    got = [x for x in queue.claim(10, lease_ms=LONG)]
    order = [x.id for x in got]
    assert set(order[:6]) == set(high["a"] + high["b"])  # the higher level first
    assert [x.lane for x in got[:6]] in (["a", "b"] * 3, ["b", "a"] * 3)  # fair inside it
    assert order[6:] == low


def test_bad_gate_arguments_are_refused_before_any_write(queue: Queue, raw: redis.Redis) -> None:
    with pytest.raises(InvalidArgument, match="priority"):
        queue.admit(jid(), b"", priority=4)
    with pytest.raises(InvalidArgument, match="lane"):
        queue.set_limits(lane_rate=RateLimit(101, 1000))
    with pytest.raises(InvalidArgument):
        RateLimit(0, 1000)
    with pytest.raises(InvalidArgument):
        RateLimit.parse("30 per second")
    assert RateLimit.parse("30/1s") == RateLimit(30, 1000)
    assert RateLimit.parse("1/1100ms") == RateLimit(1, 1100)
    k = queue.keys
    with pytest.raises(InvalidArgument, match="EMQARG"):  # the script's own check
        queue.connector.eval(bundle()["limits"], [k["meta"], k["rate"]], ["5", "0", "0", "0"])
    with pytest.raises(InvalidArgument, match="EMQARG"):
        queue.connector.eval(bundle()["pause"], [k["meta"], k["pending"], k["wake"]], ["2"])
    assert raw.exists(k["meta"], k["rate"]) == 0
