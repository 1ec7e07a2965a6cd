"""EchoMQ on a real local Valkey Cluster: routing across nodes, kill -9 and manual failover
under load, and durable admission with a stopped replica (docs/cluster.md)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from redis.cluster import ClusterNode as RedisClusterNode
from redis.cluster import RedisCluster

from echomq import (
    AsyncClusterConnector,
    AsyncConnector,
    AsyncQueue,
    ClusterConnector,
    Connector,
    Lease,
    NotDurable,
    QueueOptions,
    Verdict,
    connect,
    connect_async,
    generate,
    slot,
)
from echomq import protocol as p
from echomq.protocol.scripts import parse
from echomq.runtime.consumer import Consumer, ConsumerOptions
from echomq.servers.local_cluster import LocalCluster
from tests.conftest import cluster_url
from tests.echomq.invariants import assert_consistent

pytestmark = pytest.mark.cluster

FAST = ConsumerOptions(beat_ms=50, lease_ms=10_000, concurrency=8, grace_s=2.0)


def jid() -> str:
    return generate("JOB")


def raw_client(cluster: LocalCluster) -> RedisCluster:
    return RedisCluster(startup_nodes=[RedisClusterNode(h, p) for h, p in cluster.startup_nodes])


def names_on_distinct_primaries(cluster: LocalCluster, prefix: str) -> list[str]:
    """One queue name per primary of ``cluster``."""
    found: dict[int, str] = {}
    for i in range(1000):
        name = f"{prefix}-{i}"
        owner = cluster.primary_for_key(f"emq:{{{name}}}:pending").port
        found.setdefault(owner, name)
        if len(found) == cluster.primaries:
            return list(found.values())
    raise AssertionError("no spread of names over the primaries")


@contextlib.asynccontextmanager
async def consuming(queue: AsyncQueue, seen: list[str]) -> AsyncIterator[Consumer]:
    async def handler(lease: Lease) -> None:
        seen.append(lease.id)

    consumer = Consumer(queue, handler, options=FAST)
    task = asyncio.create_task(consumer.run())
    try:
        yield consumer
    finally:
        consumer.stop()
        await asyncio.wait_for(task, 15)


async def drained(queues: list[AsyncQueue], total: int, within: float) -> None:
    deadline = time.monotonic() + within
    while sum([(await q.stats()).done for q in queues]) < total:
        assert time.monotonic() < deadline, [await q.stats() for q in queues]
        await asyncio.sleep(0.05)


@pytest.fixture
def own_cluster() -> Iterator[LocalCluster]:
    """A private cluster for tests that kill a node."""
    with LocalCluster(primaries=3, replicas_per_primary=1, node_timeout_ms=2000) as cluster:
        yield cluster


# ------------------------------------------------------------------------------- routing
def test_connect_picks_single_or_cluster_from_the_target() -> None:
    assert isinstance(connect_async("redis://127.0.0.1:1"), AsyncConnector)
    assert isinstance(connect("redis://127.0.0.1:1"), Connector)
    for target in ("redis+cluster://127.0.0.1:7000", "redis://a:1,b:2", "valkey+cluster://a:1/0"):
        assert isinstance(connect_async(target), AsyncClusterConnector), target
    assert isinstance(connect(["127.0.0.1:7000", ("127.0.0.1", 7001)]), ClusterConnector)
    conn = connect_async("redis://127.0.0.1:7000", cluster=True)
    assert isinstance(conn, AsyncClusterConnector)
    assert conn.seeds == [("127.0.0.1", 7000)]
    c2 = AsyncClusterConnector.from_url("rediss+cluster://u:p@[::1]:7000,h2")
    assert c2.seeds == [("::1", 7000), ("h2", 6379)]
    with pytest.raises(ValueError, match="database 0"):
        connect_async("redis+cluster://a:1/3")
    with pytest.raises(ValueError, match="names a cluster"):
        connect_async("redis://a:1,b:2", cluster=False)


async def test_queues_on_different_nodes_work_side_by_side(local_cluster: LocalCluster,
                                                           qname: str) -> None:
    names = names_on_distinct_primaries(local_cluster, qname)
    assert len({slot(f"emq:{{{n}}}:x") for n in names}) == 3
    conn = AsyncClusterConnector.from_url(cluster_url(local_cluster))
    raw = raw_client(local_cluster)
    queues = [AsyncQueue(conn, n) for n in names]
    try:
        for q in queues:
            await q.fence()
        # One pipeline over three nodes, items interleaved: verdicts in input order.
        ids = [jid() for _ in range(60)]
        calls = [p.enqueue(queues[i % 3].k, j, b"p") for i, j in enumerate(ids)]
        calls.insert(7, p.enqueue(queues[1].k, ids[1], b"again"))  # a duplicate, in place
        replies = await conn.pipeline(calls)
        assert replies[7] == 0 and replies.count(1) == 60
        per_queue = [await q.enqueue_many([(jid(), b"m") for _ in range(20)]) for q in queues]
        assert all(v is Verdict.ENQUEUED for vs in per_queue for v in vs)
        seen: list[str] = []
        async with contextlib.AsyncExitStack() as stack:
            for q in queues:
                await stack.enter_async_context(consuming(q, seen))
            await drained(queues, 120, 20)
        assert len(seen) == len(set(seen)) == 120
        for q in queues:
            assert set(assert_consistent(raw, q.name).values()) == {"done"}
    finally:
        await conn.aclose()
        raw.close()


async def test_noscript_on_every_node_is_recovered(local_cluster: LocalCluster, qname: str) -> None:
    names = names_on_distinct_primaries(local_cluster, qname)
    conn = AsyncClusterConnector.from_url(cluster_url(local_cluster))
    try:
        queues = [AsyncQueue(conn, n) for n in names]
        await queues[0].enqueue(jid(), b"warm")
        for node in local_cluster.nodes:
            node.command("SCRIPT", "FLUSH")
        calls = [p.enqueue(q.k, jid(), b"x") for q in queues for _ in range(3)]
        assert await conn.pipeline(calls) == [1] * 9
        for node in local_cluster.nodes:
            node.command("SCRIPT", "FLUSH")
        assert all([await q.enqueue(jid(), b"y") is Verdict.ENQUEUED for q in queues])
    finally:
        await conn.aclose()


# ------------------------------------------------------------------------------ failover
class Producer:
    """Admits jobs one at a time and records what was acknowledged and when."""

    def __init__(self, queue: AsyncQueue) -> None:
        self.queue = queue
        self.acked: list[str] = []
        self.failed: list[BaseException] = []
        self.times: list[float] = []
        self.slowest = 0.0
        self._stop = asyncio.Event()

    async def run(self) -> None:
        while not self._stop.is_set():
            job = jid()
            t0 = time.monotonic()
            try:
                verdict = await self.queue.enqueue(job, b"load")
            except Exception as exc:
                self.failed.append(exc)
                continue
            assert verdict in (Verdict.ENQUEUED, Verdict.DUPLICATE)  # a resend answers DUPLICATE
            self.acked.append(job)
            now = time.monotonic()
            self.times.append(now)
            self.slowest = max(self.slowest, now - t0)
            await asyncio.sleep(0.002)

    def stop(self) -> None:
        self._stop.set()

    @property
    def longest_gap(self) -> float:
        return max((b - a for a, b in zip(self.times, self.times[1:], strict=False)), default=0.0)


async def acked_at_least(producers: list[Producer], n: int, within: float = 30) -> None:
    """Poll until the producers together have ``n`` acknowledged admissions."""
    deadline = time.monotonic() + within
    while sum(len(p.acked) for p in producers) < n:
        assert time.monotonic() < deadline, f"fewer than {n} admissions acknowledged"
        await asyncio.sleep(0.01)


def noscript_count(node: Any) -> int:
    stat = node.command("INFO", "errorstats").get("errorstat_NOSCRIPT", {})
    return int(stat.get("count", 0))


@pytest.mark.slow
@pytest.mark.timeout(90)
async def test_kill_9_of_the_owning_primary_loses_no_acknowledged_job(
        own_cluster: LocalCluster) -> None:
    cluster = own_cluster
    conn = AsyncClusterConnector.from_url(cluster_url(cluster))
    queue = AsyncQueue(conn, "failover")
    primary = cluster.primary_for_key(queue.keys["pending"])
    replica = cluster.replica_of(primary)
    producers = [Producer(queue) for _ in range(2)]
    seen: list[str] = []
    try:
        async with consuming(queue, seen) as consumer:
            tasks = [asyncio.create_task(p.run()) for p in producers]
            await acked_at_least(producers, 100)
            before = sum(len(p.acked) for p in producers)
            cluster.kill_node(primary)
            killed_at = time.monotonic()
            while replica.role != "primary":
                assert time.monotonic() - killed_at < 15, "replica not promoted"
                await asyncio.sleep(0.05)
            promoted_after = time.monotonic() - killed_at
            # keep producing on the new primary
            await acked_at_least(producers, sum(len(p.acked) for p in producers) + 100)
            for p in producers:
                p.stop()
            await asyncio.gather(*tasks)
            acked = [j for p in producers for j in p.acked]
            when = {j: t for p in producers for j, t in zip(p.acked, p.times, strict=True)}
            assert len(acked) > before + 50, "admissions did not resume after the failover"
            raw = raw_client(cluster)
            try:  # asynchronous replication may lose only the last acks before the kill
                lost = {j for j in acked if not raw.exists(queue.keys["pending"].replace(
                    "pending", f"job:{j}"))}
            finally:
                raw.close()
            assert all(killed_at - 1.0 <= when[j] <= killed_at for j in lost), lost
            await drained([queue], len(acked) - len(lost), 30)  # the same consumer, never restarted
            # This one consumer, never restarted, finished every kept acknowledged job across the
            # failover: the keyspace below shows it (every row done, each run by it). Its reply
            # counts cannot: a completion whose reply the failover cut is counted as an error.
            assert consumer.stats.claimed >= len(acked) - len(lost)
        outage = max(p.longest_gap for p in producers)
        print(f"\npromotion after {promoted_after:.2f}s; application outage {outage:.2f}s; "
              f"slowest admission {max(p.slowest for p in producers):.2f}s; "
              f"{len(acked)} jobs acknowledged")
        assert not [e for p in producers for e in p.failed]  # the outage is printed, not timed
        assert noscript_count(replica) >= 1  # the promoted replica had no scripts: handled
        raw = raw_client(cluster)
        try:
            where = assert_consistent(raw, queue.name)
        finally:
            raw.close()
        assert set(acked) - lost <= set(where)  # no acknowledged job lost but the last acks
        assert set(where.values()) == {"done"}
        assert set(seen) == set(acked) - lost
    finally:
        await conn.aclose()


@pytest.mark.timeout(60)
async def test_manual_failover_fails_no_admission(local_cluster: LocalCluster, qname: str) -> None:
    conn = AsyncClusterConnector.from_url(cluster_url(local_cluster))
    queue = AsyncQueue(conn, qname)
    producer = Producer(queue)
    try:
        await queue.fence()
        task = asyncio.create_task(producer.run())
        await acked_at_least([producer], 20)
        primary = local_cluster.primary_for_key(queue.keys["pending"])
        replica = local_cluster.replica_of(primary)
        await asyncio.to_thread(local_cluster.failover, replica)
        await acked_at_least([producer], len(producer.acked) + 20)  # admitting on the new primary
        producer.stop()
        await task
        assert replica.role == "primary"
        assert producer.failed == []
        assert (await queue.stats()).pending == len(producer.acked)
    finally:
        await conn.aclose()


# ----------------------------------------------------------------------- durable admission
@pytest.mark.slow
@pytest.mark.timeout(90)
async def test_durable_admission_fails_clearly_while_the_replica_is_stopped(
        local_cluster: LocalCluster, qname: str) -> None:
    conn = AsyncClusterConnector.from_url(cluster_url(local_cluster))
    opts = QueueOptions(durable_replicas=1, durable_timeout_ms=300)
    queue = AsyncQueue(conn, qname, options=opts)
    try:
        assert await queue.enqueue(jid(), b"ok") is Verdict.ENQUEUED
        assert await queue.enqueue_many([(jid(), b"ok")] * 1) == [Verdict.ENQUEUED]
        replica = local_cluster.replica_of(local_cluster.primary_for_key(queue.keys["pending"]))
        local_cluster.pause_node(replica)
        try:
            with pytest.raises(NotDurable, match="0 of 1 replicas"):
                await queue.enqueue(jid(), b"lost?")
            verdicts = await queue.enqueue_many([(jid(), b"a"), (jid(), b"b")])
            assert [type(v) for v in verdicts] == [NotDurable, NotDurable]
            with pytest.raises(NotDurable):
                await queue.admit(jid(), b"lane", lane="p1")
        finally:
            local_cluster.resume_node(replica)
        deadline = time.monotonic() + 30
        while True:  # the replica catches up; admissions are durable again
            try:
                assert await queue.enqueue(jid(), b"again") is Verdict.ENQUEUED
                break
            except NotDurable:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.1)
        assert await queue.enqueue_many([(jid(), b"x"), (jid(), b"y")]) == [Verdict.ENQUEUED] * 2
        await asyncio.to_thread(local_cluster.wait_healthy, 30)
    finally:
        await conn.aclose()


@pytest.mark.slow
async def test_ask_and_tryagain_during_a_slot_migration(own_cluster: LocalCluster) -> None:
    """A slot migrating to another node: a call for keys not on the source answers ASK and
    goes (ASKING + EVALSHA, NOSCRIPT loaded there) to the importing node; a multi-key call
    answers TRYAGAIN there until the migration ends, then MOVED to the new owner."""
    cluster = own_cluster
    name = "migrating"
    s = slot(f"emq:{{{name}}}:x")
    source = cluster.primary_for_slot(s)
    target = next(n for n in cluster.nodes if n.role == "primary" and n is not source)
    target.command("CLUSTER", "SETSLOT", s, "IMPORTING", source.node_id)
    source.command("CLUSTER", "SETSLOT", s, "MIGRATING", target.node_id)
    conn = AsyncClusterConnector.from_url(cluster_url(cluster))
    try:
        queue = AsyncQueue(conn, name)
        # One key (every queue script also declares meta, so it waits out the migration):
        # ASK, then ASKING + EVALSHA on the importing node, NOSCRIPT loaded there.
        one_key = parse("one_key", "#!lua flags=no-writes\n-- name: one_key\n-- summary: ZCARD\n"
                                   "-- KEYS[1] set: a set\n-- RETURNS: its size\n-- ERRORS: none\n"
                                   "return redis.call('ZCARD', KEYS[1])\n")
        assert await conn.eval(one_key, [queue.keys["pending"]], []) == 0
        assert await conn.node_for_key(queue.keys["pending"]) == source.address  # ASK: no map change
        job = jid()
        admission = asyncio.create_task(queue.enqueue(job, b"moved"))
        await asyncio.sleep(0.5)
        assert not admission.done()  # TRYAGAIN, ridden out
        others = [n for n in cluster.nodes if n.role == "primary" and n not in (target, source)]
        for node in (target, source, *others):
            node.command("CLUSTER", "SETSLOT", s, "NODE", target.node_id)
        assert await asyncio.wait_for(admission, 10) is Verdict.ENQUEUED
        assert target.command("HGET", queue.job_key(job), "payload") == b"moved"
        assert await conn.node_for_key(queue.keys["pending"]) == target.address
    finally:
        await conn.aclose()


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_durable_admission_follows_a_failover_it_has_not_learned_of(
        own_cluster: LocalCluster, qname: str) -> None:
    """After a failover the connector's slot map still names the old primary, now a replica:
    the admission answers MOVED there and its WAIT is refused ("cannot be used with replica
    instances"). The calls must follow the redirection and end durable on the new primary,
    not fail as one server error for the whole flush."""
    conn = AsyncClusterConnector.from_url(cluster_url(own_cluster))
    queue = AsyncQueue(conn, qname, options=QueueOptions(durable_replicas=1, durable_timeout_ms=2000))
    try:
        assert await queue.enqueue(jid(), b"before") is Verdict.ENQUEUED
        old = own_cluster.primary_for_key(queue.keys["pending"])
        await asyncio.to_thread(own_cluster.failover, own_cluster.replica_of(old))
        await asyncio.to_thread(own_cluster.wait_healthy, 60)
        assert old.role == "replica"
        ids = [jid() for _ in range(20)]
        verdicts = await queue.enqueue_many([(i, b"after") for i in ids])
        assert verdicts == [Verdict.ENQUEUED] * 20
        assert await queue.enqueue(jid(), b"one") is Verdict.ENQUEUED
        assert (await queue.stats()).pending == 22
    finally:
        await conn.aclose()
