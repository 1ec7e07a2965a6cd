"""Sharded queues (echomq.protocol.sharding, echomq.client._async.sharded): one logical queue over N
ordinary queues, on the single server and on the local 3+3 cluster."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import pytest
import redis

from echomq import (
    AsyncShardedQueue,
    CancelOutcome,
    Completion,
    ConsumerChild,
    ConsumerOptions,
    Hooks,
    InvalidArgument,
    InvalidJobId,
    Lease,
    QueueNotFound,
    QueueOptions,
    ShardCountMismatch,
    ShardedConsumer,
    ShardedQueue,
    Verdict,
    generate,
    keyspace,
    reshard_async,
)
from echomq.protocol.sharding import MAX_SHARDS, RETIRED, ShardLayout
from echomq.servers.local_cluster import LocalCluster
from tests.echomq._async.support import wait_for
from tests.echomq.test_consumer import subscribed

LONG = 600_000


# ------------------------------------------------------------------ layout (pure)
@pytest.mark.parametrize("count", [1, 2, 3, 6, 12, 64])
def test_each_shard_sits_in_the_middle_of_its_own_slot_range(count: int) -> None:
    layout = ShardLayout("orders", count)
    width = keyspace.SLOTS / count
    for i, name in enumerate(layout.names):
        assert name.startswith(f"orders#{i}/{count}")
        slot = keyspace.slot(keyspace.queue_key(name, "pending"))
        assert i * width + width / 4 <= slot < (i + 1) * width - width / 4
    assert len(set(layout.names)) == count


def test_a_lane_keeps_its_jobs_in_one_shard_and_ids_spread() -> None:
    layout = ShardLayout("q", 6)
    assert len({layout.index(generate("JOB"), "player-7") for _ in range(50)}) == 1
    spread = Counter(layout.index(generate("JOB")) for _ in range(6000))
    assert len(spread) == 6 and min(spread.values()) > 600  # uniform: 1000 each


@pytest.mark.parametrize("count", [0, -1, MAX_SHARDS + 1, True, "3"])
def test_a_bad_shard_count_is_refused_before_any_io(count: Any) -> None:
    with pytest.raises(InvalidArgument):
        ShardLayout("q", count)


def test_names_that_would_not_fit_are_refused() -> None:
    with pytest.raises(InvalidArgument):
        ShardLayout("x" * 120, 3)
    with pytest.raises(InvalidArgument):
        ShardLayout("a{b}", 3)


# ----------------------------------------------------------- placement on the cluster
def test_shards_land_on_different_primaries(local_cluster: LocalCluster) -> None:
    for count, per_primary in ((3, 1), (6, 2)):
        owners = Counter(
            local_cluster.primary_for_key(keyspace.queue_key(name, "pending")).port
            for name in ShardLayout("placed", count).names)
        assert sorted(owners.values()) == [per_primary] * 3, owners


# ------------------------------------------------------------------- admission
async def test_enqueue_many_gives_verdicts_in_input_order(conn: Any, qname: str) -> None:
    q = AsyncShardedQueue(conn, qname, shards=3)
    ids = [generate("JOB") for _ in range(60)]
    wrong = generate("ORD")
    items: list[Any] = [(i, b"x") for i in ids]
    items += [(ids[0], b"again"), (wrong, b"x"), ("not-an-id", b"x"), ("only-one",),
              (ids[5], "not bytes")]
    got = await q.enqueue_many(items)
    assert got[:60] == [Verdict.ENQUEUED] * 60
    assert got[60] is Verdict.DUPLICATE and got[61] is Verdict.KIND
    assert isinstance(got[62], InvalidJobId) and isinstance(got[63], InvalidArgument)
    assert isinstance(got[64], InvalidArgument)
    per_shard = await q.stats_by_shard()
    assert [s.pending for s in per_shard] == [
        sum(1 for i in ids if q.layout.index(i) == n) for n in range(3)]
    assert min(s.pending for s in per_shard) > 0
    assert (await q.stats()).pending == 60 == await q.pending_size()
    for jid in ids[:5]:
        assert (await q.job(jid)) is not None


async def test_a_serial_lane_keeps_its_order_in_one_shard(conn: Any, qname: str) -> None:
    q = AsyncShardedQueue(conn, qname, shards=3)
    ids = [generate("JOB") for _ in range(8)]
    for jid in ids:
        assert await q.admit(jid, b"", lane="p1", serial=True) is Verdict.ENQUEUED
    home = q.shard_for(ids[0], "p1")
    assert (await home.stats()).pending == 8
    order = []
    for _ in range(8):
        (lease,) = await q.claim(4, lease_ms=LONG)  # one at a time: the lane is serial
        order.append(lease.id)
        assert lease.queue == home.name
        assert await q.complete(lease) is not None
    assert order == ids


async def test_a_client_with_another_shard_count_is_refused(conn: Any, qname: str) -> None:
    q3 = AsyncShardedQueue(conn, qname, shards=3)
    assert await q3.enqueue(generate("JOB"), b"") is Verdict.ENQUEUED
    q4 = AsyncShardedQueue(conn, qname, shards=4)
    with pytest.raises(ShardCountMismatch, match="has 3 shards"):
        await q4.enqueue(generate("JOB"), b"")
    with pytest.raises(ShardCountMismatch):
        await q4.stats()
    assert (await q3.stats()).pending == 1  # the refused client wrote nothing


def test_the_blocking_api_is_the_same_queue(sync_conn: Any, qname: str) -> None:
    q = ShardedQueue(sync_conn, qname, shards=3)
    got = q.enqueue_many([(generate("JOB"), b"p") for _ in range(9)])
    assert got == [Verdict.ENQUEUED] * 9
    leases = q.claim(9, lease_ms=LONG)
    assert len(leases) == 9
    assert q.complete_many(leases) == [Completion.COMPLETED] * 9
    assert q.stats().done == 9


# ------------------------------------------------------------------ claim plane
async def test_claims_visit_every_shard_in_turn(conn: Any, qname: str) -> None:
    q = AsyncShardedQueue(conn, qname, shards=3)
    for n in range(3):  # ten jobs in each shard
        lane = next(f"l{i}" for i in range(1000) if q.layout.index("", f"l{i}") == n)
        await q.admit_many([(generate("JOB"), b"", lane) for _ in range(10)])
    taken = Counter()
    for _ in range(9):
        (lease,) = await q.claim(1, lease_ms=LONG)
        taken[lease.queue] += 1
    assert sorted(taken.values()) == [3, 3, 3]  # one claim per shard per turn
    leases = await q.claim(30, lease_ms=LONG)  # the rest, from every shard in one call
    assert len(leases) == 21
    deadlines = await q.heartbeat_many(leases, lease_ms=LONG)
    assert all(deadlines)
    results = [lease.id.encode() for lease in leases]
    done = await q.complete_many(leases, results)
    assert done == [Completion.COMPLETED] * 21
    assert (await q.stats()).done == 21


async def test_a_lease_of_another_queue_is_refused(conn: Any, qname: str) -> None:
    q = AsyncShardedQueue(conn, qname, shards=2)
    stray = Lease(queue="elsewhere", id=generate("JOB"), attempt=1, payload=b"", lane=None,
                  deadline_ms=0)
    with pytest.raises(InvalidArgument):
        await q.complete(stray)


# ------------------------------------------------------- dead jobs, pages, upkeep
async def test_dead_jobs_and_pages_cover_every_shard(conn: Any, qname: str) -> None:
    from echomq import QueueOptions

    q = AsyncShardedQueue(conn, qname, shards=3, options=QueueOptions(max_attempts=1))
    # Four ids per shard, chosen by the layout: a burst of twelve minted ids lands on one
    # shard about once in a thousand runs (consecutive ids differ in their last characters).
    layout, per_shard = ShardLayout(qname, 3), Counter[int]()
    ids: list[str] = []
    while len(ids) < 12:
        job_id = generate("JOB")
        if per_shard[layout.index(job_id)] < 4:
            per_shard[layout.index(job_id)] += 1
            ids.append(job_id)
    await q.enqueue_many([(job_id, b"") for job_id in ids])
    for lease in await q.claim(12, lease_ms=LONG):
        await q.retry(lease, delay_ms=0, error="boom")
    assert (await q.stats()).dead == 12
    assert [s.dead for s in await q.stats_by_shard()] == [4, 4, 4]
    page1 = await q.browse("dead", offset=0, limit=5)
    page2 = await q.browse("dead", offset=5, limit=50)
    assert len(page1) == 5 and len(page2) == 7
    assert len({v.id for v in page1 + page2}) == 12
    moved = await q.requeue_dead(limit=5)
    assert int(moved) == 5 and moved.remaining == 7
    gone = await q.purge_dead(limit=100)
    assert int(gone) == 7 and gone.remaining == 0
    assert (await q.stats()).pending == 5
    assert await q.cancel([v.id for v in page1]) == [CancelOutcome.CANCELLED] * 5
    after = await q.stats()  # cancelled rows are kept in the done sets (decision 0023)
    assert (after.pending, after.done, after.total) == (0, 5, 5)
    with pytest.raises(InvalidArgument):
        await q.browse("dead", limit=-1)


# -------------------------------------------------------------------- consumer
async def test_a_sharded_consumer_drains_and_wakes_on_every_shard(conn: Any, qname: str,
                                                                  raw: redis.Redis) -> None:
    q = AsyncShardedQueue(conn, qname, shards=3)
    seen: list[Lease] = []

    async def handler(lease: Lease) -> None:
        seen.append(lease)

    # A one-hour beat: no shard polls within the test, so each job starts only because its
    # shard's wake channel (or hand-off) woke that shard's consumer; 50 ms polling would not.
    consumer = ShardedConsumer(q, handler, options=ConsumerOptions(
        concurrency=6, beat_ms=3_600_000, lease_ms=10_800_000))
    run = asyncio.create_task(consumer.run())
    for shard in q.shards:  # every shard's consumer idle and listening before the first job
        await wait_for(lambda shard=shard: subscribed(raw, shard.keys["wake"]), 30)
    ids = [generate("JOB") for _ in range(30)]
    await q.enqueue_many([(i, b"") for i in ids])
    await _until(lambda: len(seen) >= 30)
    # idle now: one job on each shard is picked up again
    more = [next(j for j in iter(lambda: generate("JOB"), None) if q.layout.index(j) == n)
            for n in range(3)]
    for jid in more:
        await q.enqueue(jid, b"")
    await _until(lambda: len(seen) >= 33)
    consumer.stop()
    await asyncio.wait_for(run, 30)
    assert sorted(x.id for x in seen) == sorted(ids + more)
    assert len({x.queue for x in seen}) == 3
    assert consumer.stats.completed == 33
    assert (await q.stats()).done == 33


async def test_a_sharded_consumer_runs_its_hooks_on_every_shard(conn: Any, qname: str) -> None:
    """``ShardedConsumer(hooks=...)``: each shard's consumer runs the same hooks, so every
    job on every shard gets before, after and finished, and a failure gets on_failure."""
    q = AsyncShardedQueue(conn, qname, shards=3, options=QueueOptions(max_attempts=1))
    calls: list[tuple[str, str, str]] = []  # (point, job id, shard queue)

    async def handler(lease: Lease) -> None:
        if lease.payload == b"boom":
            raise ValueError("boom")

    hooks = Hooks(
        before=[lambda lease: calls.append(("before", lease.id, lease.queue))],
        after=[lambda lease, outcome, s: calls.append(("after", lease.id, lease.queue))],
        on_failure=[lambda lease, error, s: calls.append(("on_failure", lease.id, str(error)))],
        finished=[lambda lease, outcome, b, e: calls.append(("finished", lease.id, lease.queue))])
    consumer = ShardedConsumer(q, handler, options=ConsumerOptions(
        concurrency=6, beat_ms=50, lease_ms=5000), hooks=hooks)
    assert all(c.hooks is hooks for c in consumer.consumers)
    ids = [next(j for j in iter(lambda: generate("JOB"), None) if q.layout.index(j) == n)
           for n in (0, 1, 2, 0, 1, 2)]
    boom = ids[4]
    await q.enqueue_many([(i, b"boom" if i == boom else b"") for i in ids])
    run = asyncio.create_task(consumer.run())
    try:
        await _until(lambda: sum(p == "finished" for p, _, _ in calls) == 6)
    finally:
        consumer.stop()
        await asyncio.wait_for(run, 30)
    for point in ("before", "after", "finished"):
        assert sorted(j for p, j, _ in calls if p == point) == sorted(ids)
    assert [(j, d) for p, j, d in calls if p == "on_failure"] == [(boom, "boom")]
    assert len({d for p, _, d in calls if p == "before"}) == 3  # every shard ran them
    assert consumer.stats.completed == 5 and consumer.stats.dead == 1
    with pytest.raises(InvalidArgument, match=r"hooks must be echomq\.Hooks"):
        ShardedConsumer(q, handler, hooks=[print])  # type: ignore[arg-type]


async def test_a_consumer_child_of_a_sharded_queue_passes_its_hooks(conn: Any, qname: str) -> None:
    q = AsyncShardedQueue(conn, qname, shards=2)
    began: list[str] = []

    async def handler(lease: Lease) -> None:
        pass

    child = ConsumerChild(q, handler, ConsumerOptions(concurrency=2, beat_ms=50, lease_ms=5000),
                          hooks=Hooks(before=[lambda lease: began.append(lease.id)]))
    ids = [generate("JOB") for _ in range(4)]
    await q.enqueue_many([(i, b"") for i in ids])
    run = asyncio.create_task(child.run())
    try:
        await _until(lambda: len(began) == 4)
    finally:
        child.stop()
        await asyncio.wait_for(run, 30)
    assert isinstance(child.current, ShardedConsumer) and sorted(began) == sorted(ids)


async def _until(cond: Any, within_s: float = 30.0) -> None:
    give_up = time.monotonic() + within_s
    while not cond():
        assert time.monotonic() < give_up, "condition not reached"
        await asyncio.sleep(0.01)


# ------------------------------------------------------------------- reshard
async def test_reshard_moves_every_job_and_stale_clients_follow(conn: Any, qname: str,
                                                                raw: redis.Redis) -> None:
    """An online reshard (decision 0032) with jobs in every state: each is where the new
    layout routes it, in the same state (a delayed job keeps its due time, a dead one its
    error, a done one its result); a client opened before follows the new layout; a
    client built with the old count afterwards is refused (a configuration error)."""
    old = AsyncShardedQueue(conn, qname, shards=3, options=QueueOptions(max_attempts=1))
    jobs = [generate("JOB") for _ in range(9)]
    await old.admit_many([(j, b"", f"lane-{i}") for i, j in enumerate(jobs)])
    leases = await old.claim(3, lease_ms=LONG)
    await old.complete(leases[0], b"kept")
    await old.retry(leases[1], delay_ms=LONG, error="boom")  # max_attempts=1: dead
    await old.complete(leases[2])  # the last active job ends: the reshard can go on
    assert await reshard_async(conn, qname, to=6) == 3
    new = AsyncShardedQueue(conn, qname, shards=6)
    got = await new.stats()
    assert (got.pending, got.active, got.done, got.dead) == (6, 0, 2, 1)
    assert new.layout.epoch == 1 and new.layout.names != ShardLayout(qname, 6).names
    assert await new.result(leases[0].id, timeout=0) == b"kept"
    dead = await new.job(leases[1].id)
    assert dead is not None and dead["state"] == b"dead" and b"boom" in dead["error"]
    for i, j in enumerate(jobs):  # each row sits in the shard the new layout routes it to
        assert await new.shard_for(j, f"lane-{i}").job(j) is not None
    # a client opened before the reshard follows it: its calls land in the new layout
    assert await old.enqueue(generate("JOB"), b"") is Verdict.ENQUEUED
    assert old.layout == new.layout and await old.admit(jobs[0], b"", lane="lane-0") \
        is Verdict.DUPLICATE
    with pytest.raises(ShardCountMismatch):  # built with the old count: a wrong config
        await AsyncShardedQueue(conn, qname, shards=3).stats()
    for name in ShardLayout(qname, 3).names:  # an old shard keeps only its retired meta
        keys = {k.decode() for k in raw.scan_iter(match=f"emq:{{{name}}}:*")}
        assert keys <= {f"emq:{{{name}}}:meta"}
        assert raw.hget(f"emq:{{{name}}}:meta", "protocol").decode().startswith(RETIRED)
    # and back to 3: a third layout (epoch 2), never the retired names again
    assert await reshard_async(conn, qname, to=3) == 6
    again = AsyncShardedQueue(conn, qname, shards=3)
    assert await again.enqueue(generate("JOB"), b"") is Verdict.ENQUEUED
    assert again.layout.epoch == 2 and not set(again.layout.names) & set(ShardLayout(qname, 3).names)
    assert (await again.stats()).done == 2


async def test_reshard_of_an_unknown_queue_is_refused(conn: Any, qname: str) -> None:
    with pytest.raises(QueueNotFound):
        await reshard_async(conn, qname, to=3)
    with pytest.raises(InvalidArgument):
        await reshard_async(conn, qname, to=0)


# ------------------------------------------------- operators see the logical queue
def _cli(*args: str) -> tuple[int, str, str]:
    from click.testing import CliRunner

    from echomq.ops.cli import main

    result = CliRunner(env={"ECHOMQ_URL": None}).invoke(main, list(args), prog_name="echomq")
    return result.exit_code, result.stdout, result.stderr


async def test_info_cli_and_dashboard_see_one_logical_queue(conn: Any, qname: str,
                                                            backend_url: str) -> None:
    import json

    from echomq.ops.dashboard import data

    q = AsyncShardedQueue(conn, qname, shards=3)
    await q.enqueue_many([(generate("JOB"), b"") for _ in range(12)])
    (lease,) = await q.claim(1, lease_ms=LONG)
    await q.retry(lease, delay_ms=LONG, error="later")
    names = await data.discover(conn)
    assert qname in names and not any(n.startswith(f"{qname}#") for n in names)
    summary = await data.summary(conn, qname)
    assert (summary.counts.pending, summary.counts.delayed) == (11, 1)
    assert len(await data.page(conn, qname, "pending", 0, 50)) == 11
    detail = await data.job_detail(conn, qname, lease.id)
    assert detail is not None and detail.state == "delayed"

    def run() -> None:
        code, out, err = _cli("info", qname, "--json", "--url", backend_url)
        assert code == 0, err
        (info,) = json.loads(out)["queues"]
        assert info["name"] == qname and info["counts"]["pending"] == 11
        code, out, _ = _cli("stats", qname, "--url", backend_url)
        assert code == 0 and "pending=11" in out and "delayed=1" in out
        code, out, err = _cli("reshard", qname, "--to", "6", "--url", backend_url)
        assert code == 0 and "3 shards -> 6" in out, err  # online: the jobs move along
        code, out, _ = _cli("stats", qname, "--url", backend_url)
        assert code == 0 and "pending=11" in out and "delayed=1" in out

    await asyncio.to_thread(run)
