"""Lanes: fair round-robin claims, serial lanes in order."""

from __future__ import annotations

import redis

from echomq import AsyncQueue, Completion, Lease, Verdict, generate
from tests.echomq.invariants import assert_consistent


def jid() -> str:
    return generate("JOB")


async def test_a_flooding_lane_cannot_starve_the_others(queue: AsyncQueue, raw: redis.Redis) -> None:
    big = [(jid(), b"big", "flood") for _ in range(10_000)]
    assert set(await queue.admit_many(big)) == {Verdict.ENQUEUED}
    singles = [(jid(), b"one", f"p{i}") for i in range(50)]
    assert set(await queue.admit_many(singles)) == {Verdict.ENQUEUED}
    order: list[str | None] = []
    while len(order) < 200:
        for lease in await queue.claim(10, lease_ms=60_000):
            order.append(lease.lane)
            await queue.complete(lease)
    single_positions = [i for i, lane in enumerate(order) if lane != "flood"]
    hundredth_big = [i for i, lane in enumerate(order) if lane == "flood"][99]
    assert len(single_positions) == 50
    assert max(single_positions) < hundredth_big
    assert_consistent(raw, queue.name)


async def test_a_late_lane_is_served_next_to_a_backlog(queue: AsyncQueue) -> None:
    await queue.admit_many([(jid(), b"", "flood") for _ in range(100)])
    for lease in await queue.claim(30, lease_ms=60_000):
        await queue.complete(lease)
    late = jid()
    await queue.admit(late, b"", lane="late")
    first_two = [x.id for x in await queue.claim(2, lease_ms=60_000)]
    assert late in first_two


async def test_serial_lane_runs_one_at_a_time_in_order(queue: AsyncQueue, raw: redis.Redis) -> None:
    ids = [jid() for _ in range(5)]
    for i in ids:
        assert await queue.admit(i, b"", lane="player-7", serial=True) is Verdict.ENQUEUED
    other = jid()
    await queue.admit(other, b"", lane="player-8", serial=True)
    seen = []
    for _ in range(5):
        got = await queue.claim(10, lease_ms=60_000)
        assert [x.lane for x in got].count("player-7") == 1  # never two of one lane in flight
        for lease in got:
            if lease.lane == "player-7":
                seen.append(lease.id)
            assert await queue.complete(lease) is Completion.COMPLETED
    assert seen == ids
    assert raw.hlen(f"emq:{{{queue.name}}}:inflight") == 0


async def test_serial_lane_stays_held_while_its_job_retries(queue: AsyncQueue) -> None:
    a, b = jid(), jid()
    await queue.admit(a, b"", lane="L", serial=True)
    await queue.admit(b, b"", lane="L", serial=True)
    (first,) = await queue.claim(5, lease_ms=60_000)
    assert first.id == a
    await queue.retry(first, delay_ms=0, error="again")
    (second,) = await queue.claim(5, lease_ms=60_000)
    assert second.id == a  # b waits: order holds through the retry
    await queue.complete(second)
    (third,) = await queue.claim(5, lease_ms=60_000)
    assert third.id == b


async def test_lanes_table_holds_only_lanes_with_waiting_jobs(queue: AsyncQueue,
                                                              raw: redis.Redis) -> None:
    await queue.admit_many([(jid(), b"", f"p{i}") for i in range(20)])
    assert raw.hlen(f"emq:{{{queue.name}}}:lanes") == 20
    for lease in await queue.claim(20, lease_ms=60_000):
        await queue.complete(lease)
    assert raw.hlen(f"emq:{{{queue.name}}}:lanes") == 0


async def _holder_behind_backlog(queue: AsyncQueue, backlog: int = 300) -> Lease:
    ids = [jid() for _ in range(backlog)]
    await queue.admit_many([(i, b"", "deep") for i in ids], serial=True)
    (holder,) = await queue.claim(1, lease_ms=60_000)
    assert holder.id == ids[0]
    return holder


async def test_a_retried_lane_holder_is_not_stranded_behind_its_backlog(queue: AsyncQueue) -> None:
    holder = await _holder_behind_backlog(queue)
    await queue.retry(holder, delay_ms=0, error="again")
    # The lane waits for its holder; a bounded claim window must still reach it.
    (again,) = await queue.claim(1, lease_ms=60_000)
    assert again.id == holder.id


async def test_a_deferred_lane_holder_comes_back_first(queue: AsyncQueue, raw: redis.Redis) -> None:
    holder = await _holder_behind_backlog(queue)
    await queue.defer(holder, delay_ms=60_000)
    raw.zadd(f"emq:{{{queue.name}}}:delayed", {holder.id: 0}, xx=True)  # due now
    assert await queue.promote() == 1
    (again,) = await queue.claim(1, lease_ms=60_000)
    assert again.id == holder.id


async def test_an_expired_lane_holder_comes_back_first(queue: AsyncQueue, raw: redis.Redis) -> None:
    holder = await _holder_behind_backlog(queue)
    raw.zadd(f"emq:{{{queue.name}}}:active", {holder.id: 0}, xx=True)  # its lease ran out
    assert await queue.reap() == (1, 0)
    (again,) = await queue.claim(1, lease_ms=60_000)
    assert (again.id, again.attempt) == (holder.id, 2)
