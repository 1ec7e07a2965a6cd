"""The claim gate of a sharded queue (echomq.client._async.sharded_gate, decision 0031):
pause/resume act on every shard (API, CLI, dashboard read), and a rate limit holds for the
logical queue, counted from the lease times the servers wrote, while its shares rebalance
toward the demand. On the single server and the 3+3 cluster."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from echomq import (
    AsyncShardedQueue,
    ConsumerOptions,
    InvalidArgument,
    Lease,
    RateLimit,
    ShardedConsumer,
    generate,
)
from echomq.client._async import sharded_gate
from echomq.protocol.shard_limits import parse_plan, split, worth_moving
from tests.echomq.test_cli import _invoke

LEASE_MS = 10_000


async def _until(cond: Any, within_s: float = 30.0) -> None:
    give_up = time.monotonic() + within_s
    while not cond():
        assert time.monotonic() < give_up, "condition not reached"
        await asyncio.sleep(0.01)


def _lane_of_shard(q: AsyncShardedQueue, shard: int, skip: int = 0) -> str:
    lanes = (f"lane-{n}" for n in range(10_000) if q.layout.index("x", f"lane-{n}") == shard)
    for _ in range(skip):
        next(lanes)
    return next(lanes)


# ------------------------------------------------------------------ shares (pure)
def test_shares_sum_to_the_budget_follow_demand_and_never_drop_to_zero() -> None:
    assert split(9, [0, 0, 0]) == [3, 3, 3]
    assert split(10, [0, 0, 0]) == [4, 3, 3]  # the rounding: the first M % N one more
    assert split(9, [60, 0, 0]) == [7, 1, 1]
    assert split(9, [30, 30, 0]) == [4, 4, 1]
    for total, demand in ((3, [5, 0, 9]), (64, [1, 2, 3, 4]), (1000, [7, 0, 0, 1, 0])):
        got = split(total, demand)
        assert sum(got) == total and min(got) >= 1
    assert not worth_moving([3, 3, 3], [3, 3, 3])
    assert worth_moving([3, 3, 3], [7, 1, 1]) and worth_moving([None, None, None], [3, 3, 3])
    assert parse_plan("7 1 1", 3) == [7, 1, 1] and parse_plan("7 1", 3) is None
    with pytest.raises(InvalidArgument, match="at least its shard count"):
        split(2, [0, 0, 0])


async def test_a_budget_below_the_shard_count_is_refused_before_any_io(conn: Any, qname: str) -> None:
    q = AsyncShardedQueue(conn, qname, shards=3)
    with pytest.raises(InvalidArgument, match="at least its shard count"):
        await q.set_limits(rate=RateLimit(2, 1000))
    assert await conn.command("EXISTS", f"emq:{{{qname}}}:shards") == 0  # nothing written


# ----------------------------------------------------------------- pause / resume
async def test_pause_and_resume_act_on_every_shard_from_the_cli(
        conn: Any, qname: str, backend_url: str) -> None:
    from echomq.ops.dashboard import data

    q = AsyncShardedQueue(conn, qname, shards=3)
    for i in range(3):
        await q.admit(generate("JOB"), b"", lane=_lane_of_shard(q, i))
    code, out, err, _ = await asyncio.to_thread(_invoke, "pause", qname, "--url", backend_url)
    assert code == 0 and f"{qname}: paused" in out, (out, err)
    assert all(g.paused for g in [await s.gate() for s in q.shards])
    assert await q.claim(9, lease_ms=LEASE_MS) == [] and (await q.stats()).pending == 3
    gate = await data.gate(conn, qname)  # the dashboard's read of the logical gate
    assert gate is not None and gate.paused
    code, out, _, _ = await asyncio.to_thread(_invoke, "resume", qname, "--url", backend_url)
    assert code == 0 and f"{qname}: running" in out
    assert not (await q.gate()).paused
    assert len(await q.claim(9, lease_ms=LEASE_MS)) == 3


async def test_one_paused_shard_pauses_the_logical_gate_until_resume(conn: Any, qname: str) -> None:
    """A pause that reached only some shards (a failure midway) reads as paused, and
    resume (idempotent on every shard) ends it."""
    q = AsyncShardedQueue(conn, qname, shards=3)
    await q.shards[1].pause()
    assert (await q.gate()).paused
    assert not (await q.resume()).paused
    assert not any(g.paused for g in [await s.gate() for s in q.shards])


# ------------------------------------------------------------------- rate limits
async def test_a_rate_limit_holds_for_the_logical_queue_while_its_shares_rebalance(
        conn: Any, qname: str, backend_url: str) -> None:
    """9 leases per 400 ms over 3 shards, two thirds of the work on one shard (the others
    kept busy too, so a share raised too early shows): the shares move to the hot shard (it
    leases more than an even third in some window), and no window of 400 ms
    holds more than 9 leases of the three shards together, counted from the lease times
    the servers wrote (each lease's deadline minus its lease time)."""
    M, W = 9, 400  # a window several beats long: a share raised too early shows in it
    q = AsyncShardedQueue(conn, qname, shards=3)
    hot = _lane_of_shard(q, 0)
    jobs = [(generate("JOB"), b"", hot) for _ in range(36)]
    jobs += [(generate("JOB"), b"", _lane_of_shard(q, 1 + i % 2, i % 6)) for i in range(18)]
    await q.admit_many(jobs)  # (no consumer yet: the limit is in place before any lease)
    code, out, err, _ = await asyncio.to_thread(_invoke, "limit", qname, "--url", backend_url,
                                                "--rate", f"{M}/{W}ms")
    assert code == 0 and f"rate {M}/{W}ms" in out, (out, err)
    assert await sharded_gate.shares(q) == [3, 3, 3]
    leased: list[tuple[int, str]] = []

    async def handler(lease: Lease) -> None:
        leased.append((lease.deadline_ms - LEASE_MS, lease.queue))

    consumer = ShardedConsumer(q, handler, options=ConsumerOptions(
        concurrency=12, beat_ms=50, lease_ms=LEASE_MS, grace_s=5))
    run = asyncio.create_task(consumer.run())
    await _until(lambda: consumer.stats.completed >= len(jobs))
    consumer.stop()
    await asyncio.wait_for(run, 30)
    times = sorted(t for t, _ in leased)
    assert len(times) == len(jobs) == len({x for x, _, _ in jobs})
    over = [(a, b) for a, b in zip(times, times[M:], strict=False) if b - a < W]
    assert not over, f"{len(over)} windows of {W} ms held more than {M} leases: {over[:3]}"
    hot_times = sorted(t for t, name in leased if name == q.shards[0].name)
    busiest = max(sum(1 for u in hot_times if t <= u < t + W) for t in hot_times)
    assert busiest > M // 3, f"the hot shard never leased more than its even share ({busiest})"
