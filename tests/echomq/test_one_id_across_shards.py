"""One id is one job across a sharded queue, whatever lane it carries (issue 29 item 3,
decision 0040): the id is reserved in its home shard before a laned admission elsewhere,
and a reservation whose producer died between the two steps is repaired.

Before, the same derived id admitted once without a lane and once with
``lane="customer-9"`` was ENQUEUED twice whenever the lane's shard was not the id's.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import redis

from echomq import (
    AsyncShardedQueue,
    ConsumerOptions,
    Lease,
    QueueOptions,
    ShardedConsumer,
    Verdict,
    derive_id,
    generate,
)
from echomq.client._async.reservations import sweep
from echomq.client._async.reshard import reshard
from echomq.protocol.reservations import decode_reservation, reserve
from echomq.protocol.resharding import rows_exist
from tests.echomq.invariants import assert_consistent

ROOT = Path(__file__).resolve().parents[2]


def _split_ids(q: AsyncShardedQueue, lane: str, n: int) -> list[str]:
    """``n`` derived ids whose lane's shard is not their home (the case that ran twice)."""
    out = [derive_id("JOB", f"order-{i}") for i in range(64)]
    away = [i for i in out if q.layout.index(i, lane) != q.layout.index(i)]
    assert len(away) >= n
    return away[:n]


def _jobs(raw: redis.Redis, q: AsyncShardedQueue) -> dict[str, list[str]]:
    """id -> the shards holding it in a state set (each shard's keyspace consistent)."""
    out: dict[str, list[str]] = {}
    for shard in q.shards:
        for jid in assert_consistent(raw, shard.name):
            out.setdefault(jid, []).append(shard.name)
    return out


async def _until(check: Callable[[], Awaitable[bool]], within: float = 10.0) -> None:
    give_up = time.monotonic() + within
    while not await check():
        assert time.monotonic() < give_up, "condition not met"
        await _tick()


async def _tick() -> None:
    import asyncio
    await asyncio.sleep(0.02)  # a poll of the server's state, not a stand-in for one


async def test_the_issue_probe_one_job_per_derived_id(conn: Any, qname: str,
                                                      raw: redis.Redis) -> None:
    q = AsyncShardedQueue(conn, qname, shards=3)
    keys = [derive_id("JOB", f"order-{i}") for i in range(4)]
    # Half without a lane first, half with the lane first.
    got = []
    for n, jid in enumerate(keys):
        first, second = (None, "customer-9") if n % 2 else ("customer-9", None)
        got.append((await q.admit(jid, b"a", lane=first), await q.admit(jid, b"b", lane=second)))
    assert got == [(Verdict.ENQUEUED, Verdict.DUPLICATE)] * 4
    assert sorted(_jobs(raw, q)) == sorted(keys)
    assert all(len(where) == 1 for where in _jobs(raw, q).values())
    assert (await q.stats()).pending == 4
    assert any(q.layout.index(k, "customer-9") != q.layout.index(k) for k in keys)


async def test_two_lanes_on_two_other_shards_one_job(conn: Any, qname: str,
                                                     raw: redis.Redis) -> None:
    q = AsyncShardedQueue(conn, qname, shards=4)
    lanes = [f"lane-{i}" for i in range(40)]
    for jid in (derive_id("JOB", f"k{i}") for i in range(6)):
        home = q.layout.index(jid)
        a, b = [ln for ln in lanes if q.layout.index(jid, ln) != home][:2]
        c = next(ln for ln in lanes if q.layout.index(jid, ln) == home)
        verdicts = [await q.admit(jid, b"x", lane=ln) for ln in (a, b, c, None, a)]
        assert verdicts == [Verdict.ENQUEUED] + [Verdict.DUPLICATE] * 4
    assert all(len(where) == 1 for where in _jobs(raw, q).values())
    assert (await q.stats()).pending == 6


async def test_batches_admit_one_job_per_id(conn: Any, qname: str, raw: redis.Redis) -> None:
    q = AsyncShardedQueue(conn, qname, shards=3)
    ids = _split_ids(q, "customer-9", 4)
    both = [(jid, b"p", "customer-9") for jid in ids] + [(jid, b"q", None) for jid in ids]
    other_kind = next(i for i in (generate("ORD") for _ in range(64))
                      if q.layout.index(i, "customer-9") != q.layout.index(i))
    got = await q.admit_many([*both, (other_kind, b"k", "customer-9")])
    assert got == [Verdict.ENQUEUED] * 4 + [Verdict.DUPLICATE] * 4 + [Verdict.KIND]
    assert await q.enqueue_many([(jid, b"r") for jid in ids]) == [Verdict.DUPLICATE] * 4
    fresh = _split_ids(q, "other", 6)[4:]
    assert await q.enqueue_many([(jid, b"s") for jid in fresh]) == [Verdict.ENQUEUED] * 2
    assert await q.admit_many([(jid, b"t", "other") for jid in fresh]) == [Verdict.DUPLICATE] * 2
    assert sorted(_jobs(raw, q)) == sorted(ids + fresh)
    assert all(len(where) == 1 for where in _jobs(raw, q).values())


async def test_a_resend_after_the_first_step_completes_the_admission(
        conn: Any, qname: str, raw: redis.Redis) -> None:
    q = AsyncShardedQueue(conn, qname, shards=3)
    await q.open()
    (jid,) = _split_ids(q, "l", 1)
    home, target = q.shards[q.layout.index(jid)], q.shards[q.layout.index(jid, "l")]
    # The first send reserved, its reply was lost before the admission: the resend admits.
    assert decode_reservation(await conn.run(reserve(home.k, jid, target.name))).verdict == "reserved"
    assert await q.admit(jid, b"x", lane="l") is Verdict.ENQUEUED
    assert await q.admit(jid, b"x", lane="l") is Verdict.DUPLICATE
    assert _jobs(raw, q) == {jid: [target.name]}
    row = await q.job(jid)
    assert row is not None and row["state"] == b"pending" and row["lane"] == b"l"


async def test_a_young_reservation_is_left_to_its_admission(conn: Any, qname: str) -> None:
    q = AsyncShardedQueue(conn, qname, shards=3)
    await q.open()
    (jid,) = _split_ids(q, "l", 1)
    home, target = q.shards[q.layout.index(jid)], q.shards[q.layout.index(jid, "l")]
    await conn.run(reserve(home.k, jid, target.name))
    assert await q.admit(jid, b"x") is Verdict.DUPLICATE  # within the window: not repaired
    assert await q.job(jid) is None  # a reservation is no job
    assert (await q.stats()).pending == 0


def _spawn_and_kill(url: str, queue: str, jid: str, lane: str) -> None:
    """A producer that took the first step and was killed (kill -9) before the second."""
    proc = subprocess.Popen([sys.executable, "-m", "tests.echomq.reserve_proc", url, queue,
                             "3", jid, lane], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().split() == ["reserved", "reserved"]
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout:
            proc.stdout.close()


@pytest.mark.parametrize("second", ["other-lane", None])
async def test_a_killed_producers_reservation_is_repaired(
        conn: Any, qname: str, raw: redis.Redis, backend_url: str, second: str | None) -> None:
    q = AsyncShardedQueue(conn, qname, shards=3, reserve_window_ms=300)
    await q.open()
    jid = next(j for j in _split_ids(q, "dead-lane", 8)
               if second is None or q.layout.index(j, second) not in
               {q.layout.index(j), q.layout.index(j, "dead-lane")})
    _spawn_and_kill(backend_url, qname, jid, "dead-lane")
    home = q.shards[q.layout.index(jid)]
    crashed = q.shards[q.layout.index(jid, "dead-lane")]

    async def stale() -> bool:
        got = await conn.run(reserve(home.k, jid, "", window_ms=300))
        return decode_reservation(got).verdict == "stale"
    await _until(stale)
    assert await q.admit(jid, b"repaired", lane=second) is Verdict.ENQUEUED
    # The crashed producer's second step, had it been only slow, now meets the void.
    assert await crashed.admit(jid, b"late", lane="dead-lane") is Verdict.DUPLICATE
    for lane in ("dead-lane", second, None):
        assert await q.admit(jid, b"again", lane=lane) is Verdict.DUPLICATE
    jobs = _jobs(raw, q)
    assert list(jobs) == [jid] and len(jobs[jid]) == 1
    row = await q.job(jid)
    assert row is not None and row["payload"] == b"repaired"


async def test_a_slow_admission_that_landed_is_not_repaired_away(
        conn: Any, qname: str, raw: redis.Redis) -> None:
    q = AsyncShardedQueue(conn, qname, shards=3, reserve_window_ms=0)
    await q.open()
    (jid,) = _split_ids(q, "l", 1)
    home, target = q.shards[q.layout.index(jid)], q.shards[q.layout.index(jid, "l")]
    await conn.run(reserve(home.k, jid, target.name))
    assert await target.admit(jid, b"landed", lane="l") is Verdict.ENQUEUED  # the second step
    # Every reservation is "stale" at window 0: the repair finds the job and stands down.
    assert await q.admit(jid, b"x") is Verdict.DUPLICATE
    assert await q.admit(jid, b"x", lane="another") is Verdict.DUPLICATE
    assert _jobs(raw, q) == {jid: [target.name]}


async def test_reshard_keeps_one_job_per_id(conn: Any, qname: str, raw: redis.Redis) -> None:
    q = AsyncShardedQueue(conn, qname, shards=2)
    ids = [generate("JOB") for _ in range(30)]
    assert await q.admit_many([(j, b"x", f"c{n % 5}") for n, j in enumerate(ids)]) == \
        [Verdict.ENQUEUED] * 30
    assert await reshard(conn, qname, to=3) == 2
    await q.open()
    assert q.layout.count == 3
    assert await q.enqueue_many([(j, b"y") for j in ids]) == [Verdict.DUPLICATE] * 30
    assert await q.admit_many([(j, b"z", "elsewhere") for j in ids]) == [Verdict.DUPLICATE] * 30
    jobs = _jobs(raw, q)
    assert sorted(jobs) == sorted(ids) and all(len(w) == 1 for w in jobs.values())
    assert (await q.stats()).pending == 30


async def test_a_reservation_left_in_the_retired_layout_refuses_nothing(
        conn: Any, qname: str, raw: redis.Redis) -> None:
    """A producer reserved in the old layout and stopped (its admission refused by the
    retirement, or killed): the id is no job, so the new layout admits it once. The old
    layout's rows are asked (``rows_exist``) while the reshard's ``from`` is set, and a
    reservation is not counted as a job there."""
    q = AsyncShardedQueue(conn, qname, shards=2)
    await q.open()
    (jid,) = _split_ids(q, "l", 1)
    home, target = q.shards[q.layout.index(jid)], q.shards[q.layout.index(jid, "l")]
    await conn.run(reserve(home.k, jid, target.name))
    assert await conn.run(rows_exist(home.k, [jid])) == [0]  # what an admission asks mid-reshard
    await q.admit(generate("JOB"), b"done", lane="l")
    (lease,) = await q.claim(1, lease_ms=60_000)
    await q.complete(lease, b"r")  # a done row keeps the reshard's `from` phase busy
    assert await reshard(conn, qname, to=3) == 2
    await q.open()
    assert await q.admit(jid, b"x", lane="l") is Verdict.ENQUEUED
    assert await q.admit(jid, b"y") is Verdict.DUPLICATE
    jobs = _jobs(raw, q)
    assert jid in jobs and len(jobs[jid]) == 1
    # The retired layout keeps only its meta: the dangling reservation went with it.
    assert {k.decode() for k in raw.scan_iter(match=f"emq:{{{home.name}}}:*")} == {
        f"emq:{{{home.name}}}:meta"}


async def test_an_admission_refused_by_a_dedupe_window_leaves_no_reservation(
        conn: Any, qname: str, raw: redis.Redis) -> None:
    """A dedupe key routes its jobs to the key's shard; an id refused there by the window
    (no job of its own) gives its reservation back, so the id stays free elsewhere."""
    q = AsyncShardedQueue(conn, qname, shards=3)
    await q.open()
    w = {"dedupe_ms": 60_000, "dedupe_key": "order-7"}
    key_shard = q.layout.index("x", "order-7")
    first, refused = [j for j in (generate("JOB") for _ in range(64))
                      if q.layout.index(j) != key_shard][:2]
    assert await q.admit(first, b"1", **w) is Verdict.ENQUEUED
    assert await q.admit(refused, b"2", **w) is Verdict.DUPLICATE  # the window's, not the id's
    assert await q.admit(refused, b"3") is Verdict.ENQUEUED  # its own job, at its home
    assert await q.admit(first, b"4") is Verdict.DUPLICATE  # first's reservation stands
    jobs = _jobs(raw, q)
    assert sorted(jobs) == sorted([first, refused]) and all(len(w) == 1 for w in jobs.values())


async def test_the_sweep_gives_back_a_reservation_whose_job_is_gone(
        conn: Any, qname: str, raw: redis.Redis) -> None:
    """A reservation outlives its job's row (completed with keep_done_ms=0): the sweep
    (a ShardedConsumer runs it once per repair window) deletes it; a young one, and one
    whose job is there, stay."""
    q = AsyncShardedQueue(conn, qname, shards=3, reserve_window_ms=0,
                          options=QueueOptions(keep_done_ms=0))
    await q.open()
    gone, kept = _split_ids(q, "l", 2)
    assert [await q.admit(j, b"x", lane="l") for j in (gone, kept)] == [Verdict.ENQUEUED] * 2
    (lease,) = [x for x in await q.claim(2, lease_ms=60_000) if x.id == gone]
    await q.complete(lease)
    assert await q.job(gone) is None  # the row went; its reservation did not
    home = {j: q.shards[q.layout.index(j)] for j in (gone, kept)}
    assert raw.hget(home[gone].job_key(gone), "state") == b"reserved"
    assert await sweep(AsyncShardedQueue(conn, qname, shards=3)) == 0  # 10 s: all young
    assert await sweep(q) == 1
    assert raw.exists(home[gone].job_key(gone)) == 0
    assert raw.zscore(home[gone].keys["reserved"], gone) is None
    assert raw.hget(home[kept].job_key(kept), "state") == b"reserved"
    assert raw.zscore(home[kept].keys["reserved"], kept) is not None
    assert await sweep(q) == 0
    assert await q.admit(kept, b"y") is Verdict.DUPLICATE


async def test_a_sharded_consumer_sweeps_the_reservations_of_its_finished_jobs(
        conn: Any, qname: str, raw: redis.Redis) -> None:
    """A ShardedConsumer runs the sweep in its upkeep once per repair window: the
    reservations of jobs it completed with keep_done_ms=0 are gone soon after."""
    import asyncio

    q = AsyncShardedQueue(conn, qname, shards=3, reserve_window_ms=200,
                          options=QueueOptions(keep_done_ms=0))
    await q.open()
    ids = _split_ids(q, "l", 3)
    assert await q.admit_many([(j, b"x", "l") for j in ids]) == [Verdict.ENQUEUED] * 3
    homes = [q.shards[q.layout.index(j)].job_key(j) for j in ids]
    assert all(raw.hget(k, "state") == b"reserved" for k in homes)

    async def handler(lease: Lease) -> None:
        return None

    consumer = ShardedConsumer(q, handler, options=ConsumerOptions(concurrency=3, beat_ms=50,
                                                                   lease_ms=5000))
    run = asyncio.create_task(consumer.run())
    try:
        async def swept() -> bool:
            return consumer.stats.completed == 3 and not any(raw.exists(k) for k in homes)
        await _until(swept, 30)
    finally:
        consumer.stop()
        await asyncio.wait_for(run, 30)
