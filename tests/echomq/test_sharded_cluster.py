"""A sharded queue on the local 3+3 cluster: kill -9 of one primary stops only its shard
for the failover; the other shards keep admitting and draining (the figures are printed,
the behaviour asserted)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from echomq import (
    AsyncClusterConnector,
    AsyncShardedQueue,
    ConsumerOptions,
    Lease,
    ShardedConsumer,
    Verdict,
    generate,
    keyspace,
)
from echomq.servers.local_cluster import LocalCluster
from tests.conftest import cluster_url
from tests.echomq.invariants import assert_consistent
from tests.echomq.test_cluster import raw_client

FAST = ConsumerOptions(beat_ms=50, lease_ms=3000, concurrency=24, grace_s=5)


@pytest.fixture
def own_cluster() -> Iterator[LocalCluster]:
    """A private cluster: this test kills one of its nodes."""
    with LocalCluster(primaries=3, replicas_per_primary=1, node_timeout_ms=2000) as cluster:
        yield cluster


class ShardProducer:
    """Admits jobs of one shard, one at a time, recording each acknowledgement's time."""

    def __init__(self, queue: AsyncShardedQueue, shard: int) -> None:
        self.queue, self.shard = queue, shard
        self.acked: list[tuple[str, float]] = []
        self.failed: list[BaseException] = []
        self._stop = asyncio.Event()

    def _id(self) -> str:
        while True:
            job = generate("JOB")
            if self.queue.layout.index(job) == self.shard:
                return job

    async def run(self) -> None:
        while not self._stop.is_set():
            job = self._id()
            try:
                verdict = await self.queue.enqueue(job, b"load")
            except Exception as exc:
                self.failed.append(exc)
                continue
            assert verdict in (Verdict.ENQUEUED, Verdict.DUPLICATE)
            self.acked.append((job, time.monotonic()))
            await asyncio.sleep(0.002)

    def stop(self) -> None:
        self._stop.set()


async def _until(cond: object, what: str, within: float = 30) -> None:
    deadline = time.monotonic() + within
    while not cond():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.02)


@pytest.mark.slow
@pytest.mark.cluster
@pytest.mark.timeout(120)
async def test_kill_9_of_one_primary_stops_only_its_shard(own_cluster: LocalCluster) -> None:
    cluster = own_cluster
    conn = AsyncClusterConnector.from_url(cluster_url(cluster))
    q = AsyncShardedQueue(conn, "sharded-failover", shards=3)
    owners = [cluster.primary_for_key(keyspace.queue_key(s.name, "pending")) for s in q.shards]
    assert len({o.port for o in owners}) == 3  # one shard per primary
    victim, replica = owners[0], cluster.replica_of(owners[0])
    seen: list[tuple[str, str, float]] = []

    async def handler(lease: Lease) -> None:
        seen.append((lease.queue, lease.id, time.monotonic()))

    consumer = ShardedConsumer(q, handler, options=FAST)
    producers = [ShardProducer(q, i) for i in range(3)]
    try:
        running = asyncio.create_task(consumer.run())
        tasks = [asyncio.create_task(p.run()) for p in producers]
        await _until(lambda: min(len(p.acked) for p in producers) >= 50, "admitting")
        cluster.kill_node(victim)
        killed = time.monotonic()
        deadline = killed + 20
        while await asyncio.to_thread(lambda: replica.role) != "primary":  # off the loop
            assert time.monotonic() < deadline, "replica not promoted"
            await asyncio.sleep(0.05)
        promoted = time.monotonic()
        await _until(lambda: len(producers[0].acked) and producers[0].acked[-1][1] > promoted,
                     "the killed shard did not admit again after the promotion")
        for p in producers:
            p.stop()
        await asyncio.gather(*tasks)

        def during(times: list[float]) -> int:
            return sum(1 for t in times if killed < t < promoted)

        window = promoted - killed
        before = [sum(1 for _, t in p.acked if killed - window < t < killed) for p in producers]
        admitted = [during([t for _, t in p.acked]) for p in producers]
        drained = [during([t for qn, _, t in seen if qn == s.name]) for s in q.shards]
        print(f"\nfailover of shard 0's primary: {window:.2f}s; admissions/s per shard in as "
              "long before it: " + ", ".join(f"{n / window:.0f}" for n in before)
              + "; during it: " + ", ".join(f"{n / window:.0f}" for n in admitted)
              + "; drained/s per shard: " + ", ".join(f"{n / window:.0f}" for n in drained))
        # the surviving shards kept admitting and draining through the outage
        assert admitted[1] > 0 and admitted[2] > 0
        assert drained[1] > 0 and drained[2] > 0
        assert not [e for p in producers for e in p.failed]  # ridden out inside the budget
        acked = {j: t for p in producers for j, t in p.acked}
        raw = raw_client(cluster)
        try:  # asynchronous replication may lose only the killed shard's last acks
            lost = {j for j, t in acked.items()
                    if not raw.exists(q.shard_for(j).job_key(j))}
            assert all(q.layout.index(j) == 0 and killed - 1.0 <= acked[j] <= killed
                       for j in lost), lost
            await _until(lambda: {j for _, j, _ in seen} >= set(acked) - lost,
                         "not every kept acknowledged job was run", 60)
            deadline = time.monotonic() + 60  # nothing left behind: every job written is done
            while (left := await q.stats()).pending + left.active + left.delayed:
                assert time.monotonic() < deadline, left
                await asyncio.sleep(0.1)
            consumer.stop()
            await asyncio.wait_for(running, 30)
            for s in q.shards:
                where = assert_consistent(raw, s.name)
                assert set(where.values()) <= {"done"}
        finally:
            raw.close()
    finally:
        consumer.stop(hurry=True)
        await conn.aclose()


@pytest.mark.slow
@pytest.mark.cluster
@pytest.mark.timeout(120)
async def test_a_claim_stuck_on_a_dead_shard_does_not_starve_the_others(
        own_cluster: LocalCluster) -> None:
    """Shard 0 has a deep backlog when its primary dies, so its member has a claim in flight
    then: that claim rides out the failover inside the connector's retry budget. The room it
    asked for must not hold the shared pool for all that time: jobs admitted to the other
    shards after the kill run before the replica is promoted."""
    cluster = own_cluster
    conn = AsyncClusterConnector.from_url(cluster_url(cluster))
    q = AsyncShardedQueue(conn, "sharded-stuck-claim", shards=3)
    owners = [cluster.primary_for_key(keyspace.queue_key(s.name, "pending")) for s in q.shards]
    assert len({o.port for o in owners}) == 3
    victim, replica = owners[0], cluster.replica_of(owners[0])
    backlog = [j for j in (generate("JOB") for _ in range(20_000)) if q.layout.index(j) == 0]
    await q.enqueue_many([(j, b"") for j in backlog])
    seen: dict[str, float] = {}

    async def handler(lease: Lease) -> None:
        seen[lease.id] = time.monotonic()
        if lease.queue == q.shards[0].name:
            await asyncio.sleep(0.005)  # shard 0 drains slowly: its backlog stays deep

    consumer = ShardedConsumer(q, handler, options=FAST)
    running = asyncio.create_task(consumer.run())
    try:
        await _until(lambda: len(seen) >= 200, "draining shard 0")
        cluster.kill_node(victim)
        killed = time.monotonic()
        late: list[str] = []
        while await asyncio.to_thread(lambda: replica.role) != "primary":
            assert time.monotonic() < killed + 20, "replica not promoted"
            if len(late) < 40:  # jobs of the live shards, admitted during the outage
                job = generate("JOB")
                if q.layout.index(job) != 0:
                    await q.enqueue(job, b"")
                    late.append(job)
            await asyncio.sleep(0.02)
        promoted = time.monotonic()
        ran = [j for j in late if seen.get(j, promoted) < promoted]
        print(f"\nfailover {promoted - killed:.2f}s: {len(ran)} of {len(late)} jobs admitted to "
              "the live shards during it ran before the promotion")
        assert late and len(ran) >= len(late) // 2, (len(ran), len(late))
    finally:
        consumer.stop(hurry=True)
        await asyncio.wait_for(asyncio.gather(running, return_exceptions=True), 30)
        await conn.aclose()
