"""Expiry (docs/decisions/0045-expiry.md) where the rest of the system meets it: sharded
queues, a running consumer (upkeep reaps, the handler never sees a late job), typed tasks,
a flow child that expires, and the operator's surfaces (info, metrics, search, the
dashboard, the CLI). Both topologies where a queue is involved; deadlines are about a
second and the tests wait on the server's clock, never on a sleep."""

from __future__ import annotations

import asyncio
import urllib.request
from typing import Any

import pytest
import redis
from click.testing import CliRunner

from echomq import (
    App,
    AsyncQueue,
    AsyncShardedQueue,
    InvalidArgument,
    JobExpired,
    Lease,
    QueueOptions,
    ShardedConsumer,
    Verdict,
    generate,
)
from echomq.client.info import queue_info
from echomq.ops.cli import main
from echomq.ops.dashboard import DashboardOptions, create_app
from echomq.ops.metrics import QueueMetrics
from echomq.protocol import flows as f
from echomq.protocol.search import SearchQuery
from echomq.runtime.consumer import Consumer, ConsumerOptions
from tests.dashboard_support import served
from tests.echomq._async.support import wait_for
from tests.echomq.invariants import assert_consistent

SHORT = 1_000
FAST = ConsumerOptions(beat_ms=20, lease_ms=5000, concurrency=4, grace_s=2.0)


async def _past(conn: Any, row: dict[str, bytes] | None) -> None:
    deadline = int((row or {})["exp"])

    async def passed() -> bool:
        return await conn.server_time_ms() > deadline

    await wait_for(passed, within=SHORT / 1000 + 5)


async def test_a_sharded_queue_expires_on_every_shard(conn: Any, qname: str) -> None:
    q = AsyncShardedQueue(conn, qname, shards=3)
    ids = [next(j for j in iter(lambda: generate("JOB"), None) if q.layout.index(j) == n)
           for n in range(3)]
    assert await q.admit(ids[0], b"a", expires_ms=SHORT) is Verdict.ENQUEUED
    assert await q.admit_many([(i, b"b", None) for i in ids[1:]], expires_ms=SHORT) == [
        Verdict.ENQUEUED] * 2
    with pytest.raises(InvalidArgument):
        await q.admit_many([(generate("JOB"), b"c", None)], expires_ms=0)
    await _past(conn, await q.shards[2].job(ids[2]))
    assert await q.claim(3, lease_ms=60_000) == []  # each shard's claim ends its own
    assert (await q.stats()).expired == 3
    assert await q.expire() == (0, 0)
    with pytest.raises(JobExpired):
        await q.result(ids[1], timeout=0)


async def test_the_sharded_reaper_runs_on_every_shard(conn: Any, qname: str) -> None:
    q = AsyncShardedQueue(conn, qname, shards=3)
    ids = [next(j for j in iter(lambda: generate("JOB"), None) if q.layout.index(j) == n)
           for n in range(3)]
    for i in ids:
        await q.admit(i, b"x", expires_ms=SHORT)
    await _past(conn, await q.shards[2].job(ids[2]))
    assert await q.expire() == (3, 0)
    assert [s.expired for s in await q.stats_by_shard()] == [1, 1, 1]


async def test_a_consumer_never_runs_a_late_job_and_its_upkeep_reaps_them(
        conn: Any, qname: str, raw: redis.Redis) -> None:
    q = AsyncQueue(conn, qname)
    ran: list[str] = []

    async def handler(lease: Lease) -> None:
        ran.append(lease.id)

    late = [generate("JOB") for _ in range(3)]
    for i in late:
        await q.admit(i, b"late", expires_ms=SHORT)
    await _past(conn, await q.job(late[-1]))
    fresh = generate("JOB")
    await q.admit(fresh, b"fresh", expires_ms=600_000)
    await q.pause()  # nothing is claimed: the upkeep's reaper must end the late ones
    consumer = Consumer(q, handler, options=FAST)
    task = asyncio.create_task(consumer.run())
    try:
        async def reaped() -> bool:
            return (await q.stats()).expired == 3

        await wait_for(reaped, within=10)
        await q.resume()

        async def done() -> bool:
            return (await q.stats()).done == 1

        await wait_for(done, within=10)
    finally:
        consumer.stop()
        await asyncio.wait_for(task, 10)
    assert ran == [fresh]
    assert assert_consistent(raw, qname) == {**dict.fromkeys(late, "expired"), fresh: "done"}


async def test_a_sharded_consumer_runs_only_jobs_within_their_deadline(conn: Any, qname: str) -> None:
    q = AsyncShardedQueue(conn, qname, shards=2)
    ran: list[str] = []

    async def handler(lease: Lease) -> None:
        ran.append(lease.id)

    late, fresh = generate("JOB"), generate("JOB")
    await q.admit(late, b"late", expires_ms=SHORT)
    await _past(conn, await q.shard_for(late).job(late))
    await q.admit(fresh, b"fresh", expires_ms=600_000)
    consumer = ShardedConsumer(q, handler, options=FAST)
    task = asyncio.create_task(consumer.run())
    try:
        async def settled() -> bool:
            s = await q.stats()
            return s.done == 1 and s.expired == 1

        await wait_for(settled, within=15)
    finally:
        consumer.stop()
        await asyncio.wait_for(task, 15)
    assert ran == [fresh]


async def test_a_typed_task_with_a_deadline_ends_expired(conn: Any, qname: str) -> None:
    app = App(connector=conn, queue=qname)

    @app.task(expires_ms=SHORT)
    async def quote(amount: int) -> int:
        return amount

    handle = await quote.admit(5)
    q = app.queue(qname)
    await _past(conn, await q.job(handle.id))
    assert await q.claim(1, lease_ms=60_000) == []
    with pytest.raises(JobExpired):
        await handle.result(timeout=0)
    many = await quote.options(expires_ms=600_000).admit_many([(1,), (2,)])
    assert [h.verdict for h in many if not isinstance(h, Exception)] == [Verdict.ENQUEUED] * 2
    assert len(await q.claim(2, lease_ms=60_000)) == 2  # within their deadline: they run
    @app.task(expires_ms=SHORT, key="order")  # a keyed task admits with a dedupe window
    async def ship(order: str) -> str:
        return order

    keyed = await ship.admit("o-1")
    await _past(conn, await q.job(keyed.id))
    assert await q.expire() == (1, 0)
    with pytest.raises(JobExpired):
        await keyed.result(timeout=0)
    assert (await ship.admit("o-1")).verdict is Verdict.DUPLICATE  # its window still holds
    with pytest.raises(InvalidArgument):
        quote.options(delay_ms=10, expires_ms=10)
    with pytest.raises(InvalidArgument):
        app.task(expires_ms=0)(lambda: None)


@pytest.mark.parametrize(("policy", "parent"), [("fail", "dead"), ("continue", "pending")])
async def test_a_flow_child_that_expires_is_a_failed_child(
        conn: Any, qname: str, raw: redis.Redis, policy: str, parent: str) -> None:
    q = AsyncQueue(conn, qname)
    pid, child, other = generate("JOB"), generate("JOB"), generate("JOB")
    assert await q.admit_flow(parent=(pid, b"p"), children=[(qname, child, b"c")],
                              on_child_failure=policy, expires_ms=SHORT)
    second = generate("JOB")
    assert await q.admit_flow(parent=(second, b"p"), children=[(qname, other, b"o")])
    row = await q.job(child) or {}
    assert raw.zscore(q.keys["expiring"], child) == float(row["exp"])  # indexed once started
    assert "exp" not in (await q.job(other) or {})
    await _past(conn, row)
    assert await q.expire() == (1, 0)
    # the same-slot parent is settled in expire's own script (decision 0041), no relay
    assert (await q.job(pid) or {})["state"].decode() == parent
    nodes = {n.id: n for n in await q.children(pid)}
    assert (nodes[child].state, nodes[child].outcome) == ("expired", "expired")
    leases = {x.id: x for x in await q.claim(2, lease_ms=60_000)}
    assert set(leases) == ({other, pid} if parent == "pending" else {other})
    await q.complete(leases[other])
    assert (await q.job(second) or {})["state"] == b"pending"  # its child completed


async def test_the_parent_side_refuses_an_unknown_outcome_but_takes_expired(
        conn: Any, qname: str) -> None:
    q = AsyncQueue(conn, qname)
    pid, child = generate("JOB"), generate("JOB")
    await q.admit_flow(parent=(pid, b"p"), children=[(qname, child, b"c")])
    with pytest.raises(InvalidArgument):
        await conn.run(f.flow_parent(q.k, "settle", pid, f.member(child, qname), "late"))
    assert await conn.run(f.flow_parent(q.k, "settle", pid, f.member(child, qname), "expired")) == 3


async def test_info_metrics_and_search_count_and_find_expired_jobs(conn: Any, qname: str) -> None:
    q = AsyncQueue(conn, qname)
    late = generate("JOB")
    await q.admit(late, b"x", lane="vip", expires_ms=SHORT)
    await q.enqueue(generate("JOB"), b"y")
    await _past(conn, await q.job(late))
    await q.expire()
    info = await queue_info(conn, qname)
    assert (info.counts.expired, info.expired_last_minute, info.counts.pending) == (1, 1, 1)
    assert info.as_dict()["counts"]["expired"] == 1
    metrics = QueueMetrics()
    await metrics.refresh(conn, [qname])
    text = metrics.exposition().decode()
    assert f'echomq_jobs{{queue="{qname}",state="expired"}} 1.0' in text
    page = await q.search(SearchQuery(states=("expired",)))
    assert [(h.id, h.state, h.lane) for h in page.hits] == [(late, "expired", "vip")]
    assert [v.id for v in await q.browse("expired")] == [late]
    assert await q.purge("expired", [late]) == 1


def test_the_dashboard_and_the_cli_show_expired_jobs(valkey_url: str, qname: str) -> None:
    async def setup() -> str:
        from echomq import AsyncConnector
        async with AsyncConnector.from_url(valkey_url) as conn:
            q = AsyncQueue(conn, qname, options=QueueOptions())
            late = generate("JOB")
            await q.admit(late, b"x", expires_ms=SHORT)
            await _past(conn, await q.job(late))
            assert await q.expire() == (1, 0)
            return late

    late = asyncio.run(setup())
    with served(create_app(valkey_url, options=DashboardOptions(sample_s=60, refresh_s=0))) as site:
        with urllib.request.urlopen(f"{site}/queues/{qname}?state=expired", timeout=30) as r:
            html = r.read().decode()
        assert late in html and 'class="badge expired"' in html
        with urllib.request.urlopen(f"{site}/queues/{qname}/jobs/{late}", timeout=30) as r:
            job = r.read().decode()
        assert "start deadline" in job and "expired" in job
    runner = CliRunner(env={"ECHOMQ_URL": None})
    got = runner.invoke(main, ["stats", qname, "--url", valkey_url])
    assert got.exit_code == 0 and "expired=1" in got.stdout
    got = runner.invoke(main, ["result", qname, late, "--url", valkey_url])
    assert got.exit_code == 5 and "expired" in got.stderr and "Traceback" not in got.stderr
    got = runner.invoke(main, ["search", qname, "--state", "expired", "--json", "--url", valkey_url])
    assert got.exit_code == 0 and late in got.stdout
