# Generated from tests/echomq/_async/test_lanes.py by scripts/unasync_gen.py. Do not edit.
"""Lanes: fair round-robin claims, serial lanes in order."""

from __future__ import annotations

import redis

from echomq import Completion, Lease, Queue, Verdict, generate
from tests.echomq.invariants import assert_consistent


def jid() -> str:
    return generate("JOB")


def test_a_flooding_lane_cannot_starve_the_others(queue: Queue, raw: redis.Redis) -> None:
    big = [(jid(), b"big", "flood") for _ in range(10_000)]
    assert set(queue.admit_many(big)) == {Verdict.ENQUEUED}
    singles = [(jid(), b"one", f"p{i}") for i in range(50)]
    assert set(queue.admit_many(singles)) == {Verdict.ENQUEUED}
    order: list[str | None] = []
    while len(order) < 200:
        for lease in queue.claim(10, lease_ms=60_000):
            order.append(lease.lane)
            queue.complete(lease)
    single_positions = [i for i, lane in enumerate(order) if lane != "flood"]
    hundredth_big = [i for i, lane in enumerate(order) if lane == "flood"][99]
    assert len(single_positions) == 50
    assert max(single_positions) < hundredth_big
    assert_consistent(raw, queue.name)


def test_a_late_lane_is_served_next_to_a_backlog(queue: Queue) -> None:
    queue.admit_many([(jid(), b"", "flood") for _ in range(100)])
    for lease in queue.claim(30, lease_ms=60_000):
        queue.complete(lease)
    late = jid()
    queue.admit(late, b"", lane="late")
    first_two = [x.id for x in queue.claim(2, lease_ms=60_000)]
    assert late in first_two


def test_serial_lane_runs_one_at_a_time_in_order(queue: Queue, raw: redis.Redis) -> None:
    ids = [jid() for _ in range(5)]
    for i in ids:
        assert queue.admit(i, b"", lane="player-7", serial=True) is Verdict.ENQUEUED
    other = jid()
    queue.admit(other, b"", lane="player-8", serial=True)
    seen = []
    for _ in range(5):
        got = queue.claim(10, lease_ms=60_000)
        assert [x.lane for x in got].count("player-7") == 1  # never two of one lane in flight
        for lease in got:
            if lease.lane == "player-7":
                seen.append(lease.id)
            assert queue.complete(lease) is Completion.COMPLETED
    assert seen == ids
    assert raw.hlen(f"emq:{{{queue.name}}}:inflight") == 0


def test_serial_lane_stays_held_while_its_job_retries(queue: Queue) -> None:
    a, b = jid(), jid()
    queue.admit(a, b"", lane="L", serial=True)
    queue.admit(b, b"", lane="L", serial=True)
    (first,) = queue.claim(5, lease_ms=60_000)
    assert first.id == a
    queue.retry(first, delay_ms=0, error="again")
    (second,) = queue.claim(5, lease_ms=60_000)
    assert second.id == a  # b waits: order holds through the retry
    queue.complete(second)
    (third,) = queue.claim(5, lease_ms=60_000)
    assert third.id == b


def test_lanes_table_holds_only_lanes_with_waiting_jobs(queue: Queue,
                                                              raw: redis.Redis) -> None:
    queue.admit_many([(jid(), b"", f"p{i}") for i in range(20)])
    assert raw.hlen(f"emq:{{{queue.name}}}:lanes") == 20
    for lease in queue.claim(20, lease_ms=60_000):
        queue.complete(lease)
    assert raw.hlen(f"emq:{{{queue.name}}}:lanes") == 0


def _holder_behind_backlog(queue: Queue, backlog: int = 300) -> Lease:
    ids = [jid() for _ in range(backlog)]
    queue.admit_many([(i, b"", "deep") for i in ids], serial=True)
    (holder,) = queue.claim(1, lease_ms=60_000)
    assert holder.id == ids[0]
    return holder


def test_a_retried_lane_holder_is_not_stranded_behind_its_backlog(queue: Queue) -> None:
    holder = _holder_behind_backlog(queue)
    queue.retry(holder, delay_ms=0, error="again")
    # The lane waits for its holder; a bounded claim window must still reach it.
    (again,) = queue.claim(1, lease_ms=60_000)
    assert again.id == holder.id


def test_a_deferred_lane_holder_comes_back_first(queue: Queue, raw: redis.Redis) -> None:
    holder = _holder_behind_backlog(queue)
    queue.defer(holder, delay_ms=60_000)
    raw.zadd(f"emq:{{{queue.name}}}:delayed", {holder.id: 0}, xx=True)  # due now
    assert queue.promote() == 1
    (again,) = queue.claim(1, lease_ms=60_000)
    assert again.id == holder.id


def test_an_expired_lane_holder_comes_back_first(queue: Queue, raw: redis.Redis) -> None:
    holder = _holder_behind_backlog(queue)
    raw.zadd(f"emq:{{{queue.name}}}:active", {holder.id: 0}, xx=True)  # its lease ran out
    assert queue.reap() == (1, 0)
    (again,) = queue.claim(1, lease_ms=60_000)
    assert (again.id, again.attempt) == (holder.id, 2)
