"""Online resharding (echomq.client._async.reshard, decision 0032): a sharded queue goes
from 2 shards to 4 and back while producers admit (one job at a time and in batches,
resending ids they already had admitted) and a consumer drains it. Every admitted id is
completed exactly once, no resend is admitted again, and the finished rows still answer
results and refuse duplicates after both switches. On the single server and the 3+3
cluster; the figures are printed."""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from typing import Any

import pytest
import redis

from echomq import (
    Ack,
    AsyncShardedQueue,
    ConsumerOptions,
    Lease,
    QueueNotDrained,
    ShardedConsumer,
    Verdict,
    generate,
    reshard_async,
)
from echomq.client._async.reshard import _Mover, read_record
from echomq.protocol.sharding import RETIRED, ShardLayout, record_key


async def _until(cond: Any, within_s: float = 60.0) -> None:
    give_up = time.monotonic() + within_s
    while not cond():
        assert time.monotonic() < give_up, "condition not reached"
        await asyncio.sleep(0.02)


class Producer:
    """Admits jobs until stopped; every 3rd call resends an id admitted before (its own or
    one of ``known``, with the same lane): each must come back DUPLICATE."""

    def __init__(self, q: AsyncShardedQueue, tag: str, batch: int,
                 known: list[tuple[str, str | None]]) -> None:
        self.q, self.tag, self.batch, self.known = q, tag, batch, known
        self.admitted: dict[str, str | None] = {}  # id -> lane
        self.resent = self.readmitted = 0
        self.slowest = 0.0  # the longest admission call (it waits out the switch)
        self._stop = asyncio.Event()
        self._rng = random.Random(tag)

    def _lane(self, n: int) -> str | None:
        return None if n % 3 == 0 else f"{self.tag}-lane-{n % 11}"

    async def run(self) -> None:
        n = 0
        while not self._stop.is_set():
            n += 1
            t0 = time.monotonic()
            if n % 3 == 0:
                job, lane = self._rng.choice(self.known if n % 2 or not self.admitted
                                             else list(self.admitted.items()))
                verdict = await self.q.admit(job, b"again", lane=lane)
                self.resent += 1
                self.readmitted += verdict is Verdict.ENQUEUED
            elif self.batch > 1:
                items = [(generate("JOB"), b"p", self._lane(n + k)) for k in range(self.batch)]
                for (job, _, lane), v in zip(items, await self.q.admit_many(items), strict=True):
                    assert v is Verdict.ENQUEUED, v
                    self.admitted[job] = lane
            else:
                job, lane = generate("JOB"), self._lane(n)
                assert await self.q.admit(job, b"p", lane=lane) is Verdict.ENQUEUED
                self.admitted[job] = lane
            self.slowest = max(self.slowest, time.monotonic() - t0)
            await asyncio.sleep(0.002)

    def stop(self) -> None:
        self._stop.set()


@pytest.mark.slow
async def test_reshard_2_to_4_and_back_while_producers_and_a_consumer_run(
        conn: Any, qname: str, raw: redis.Redis, backend: str) -> None:
    q = AsyncShardedQueue(conn, qname, shards=2)
    await q.open()
    # Finished rows before the reshards: their move keeps the old layout in the record
    # for a while, so resends meet rows still in the retired layout.
    early = [(generate("JOB"), b"", f"early-{i % 5}" if i % 2 else None) for i in range(1500)]
    await q.admit_many(early)
    runs: Counter[str] = Counter()

    async def handler(lease: Lease) -> Ack:
        runs[lease.id] += 1
        await asyncio.sleep(random.random() * 0.004)
        return Ack(result=lease.id.encode())

    consumer = ShardedConsumer(q, handler, options=ConsumerOptions(
        concurrency=8, beat_ms=50, lease_ms=10_000, grace_s=5))
    running = asyncio.create_task(consumer.run())
    await _until(lambda: consumer.stats.completed >= len(early))
    known = [(job, lane) for job, _, lane in early]
    producers = [Producer(AsyncShardedQueue(conn, qname, shards=2), "a", 1, known),
                 Producer(AsyncShardedQueue(conn, qname, shards=2), "b", 8, known)]
    feeding = [asyncio.create_task(p.run()) for p in producers]
    took = []
    for to in (4, 2):
        target = len(runs) + 150
        await _until(lambda: len(runs) >= target)  # noqa: B023 (read at once, in this turn)
        t0 = time.monotonic()
        await reshard_async(conn, qname, to=to)
        took.append(time.monotonic() - t0)
    await _until(lambda: sum(len(p.admitted) for p in producers) >= 500)
    for p in producers:
        p.stop()
    await asyncio.gather(*feeding)
    admitted = {job for job, _, _ in early} | {j for p in producers for j in p.admitted}
    await _until(lambda: set(runs) >= admitted)
    consumer.stop()
    await asyncio.wait_for(running, 30)

    twice = [j for j, n in runs.items() if n > 1]
    lost = admitted - set(runs)
    readmitted = sum(p.readmitted for p in producers)
    print(f"\nonline reshard [{backend}]: {len(admitted)} jobs admitted, "
          f"{sum(p.resent for p in producers)} resends ({readmitted} admitted again), "
          f"2->4 in {took[0]:.3f} s, 4->2 in {took[1]:.3f} s, longest admission "
          f"{max(p.slowest for p in producers):.3f} s; run twice {len(twice)}, lost {len(lost)}")
    assert not lost and not twice and readmitted == 0
    assert set(runs) == admitted
    # the finished rows came along: counts, results, and the dedupe window
    assert (await q.stats()).done == len(admitted)
    assert q.layout.count == 2 and q.layout.epoch == 2
    sample = [*random.Random(7).sample(sorted(admitted), 30), early[0][0], early[1][0]]
    for job in sample:
        assert await q.result(job, timeout=5) == job.encode()
    lanes = {job: lane for job, _, lane in early} | {
        j: lane for p in producers for j, lane in p.admitted.items()}
    fresh = AsyncShardedQueue(conn, qname, shards=2)
    for job in sample:
        assert await fresh.admit(job, b"x", lane=lanes[job]) is Verdict.DUPLICATE
    # every retired shard keeps only its meta (the marker refusing stale clients)
    for layout in (ShardLayout(qname, 2), ShardLayout(qname, 4, 1)):
        for name in layout.names:
            keys = {k.decode() for k in raw.scan_iter(match=f"emq:{{{name}}}:*")}
            assert keys <= {f"emq:{{{name}}}:meta"}, keys
            assert raw.hget(f"emq:{{{name}}}:meta", "protocol").decode().startswith(RETIRED)
    record = {k.decode(): v.decode() for k, v in raw.hgetall(record_key(qname)).items()}
    assert record == {"count": "2", "epoch": "2"}


async def test_a_reshard_waits_for_running_jobs_and_is_undone_if_they_do_not_end(
        conn: Any, qname: str) -> None:
    """The first phase pauses the old layout and waits for its active jobs; if they do not
    end in time, claims resume and nothing changed (QueueNotDrained)."""
    q = AsyncShardedQueue(conn, qname, shards=2)
    await q.enqueue_many([(generate("JOB"), b"") for _ in range(4)])
    held = await q.claim(1, lease_ms=60_000)
    with pytest.raises(QueueNotDrained, match="still active"):
        await reshard_async(conn, qname, to=4, wait_s=0.3)
    assert not (await q.gate()).paused and q.layout.count == 2
    assert len(await q.claim(3, lease_ms=60_000)) == 3  # claims go on
    assert await q.complete(held[0]) is not None


class _Crashing(_Mover):
    """A mover that dies at a chosen step: before the finished rows move, or right after
    recording the reshard it was asked for (its token is then left to expire)."""

    def __init__(self, conn: Any, name: str, at: str) -> None:
        super().__init__(conn, name)
        self.at = at

    async def prepare(self, rec: Any, target: Any, wait_s: float) -> bool:
        if self.at == "prepare":
            raise RuntimeError("the operator's process died")
        return await super().prepare(rec, target, wait_s)

    async def move(self, source: Any, target: Any, states: tuple[str, ...],
                   limit: int | None) -> int:
        if self.at == "finished" and "done" in states:
            raise RuntimeError("the operator's process died")
        return await super().move(source, target, states, limit)


@pytest.mark.parametrize("at", ["prepare", "finished"])
async def test_a_reshard_left_halfway_is_finished_by_a_consumers_upkeep(
        conn: Any, qname: str, raw: redis.Redis, at: str) -> None:
    """The operator dies after recording the reshard (its layout paused), or after the
    switch with the finished rows still in the old layout; once its token expires, a
    running ShardedConsumer's upkeep finishes the reshard from the record: every job done
    once, the results answered, the record committed."""
    q = AsyncShardedQueue(conn, qname, shards=2)
    done = [generate("JOB") for _ in range(20)]
    await q.enqueue_many([(j, b"") for j in done])
    for lease in await q.claim(20, lease_ms=60_000):
        await q.complete(lease, lease.id.encode())
    waiting = [generate("JOB") for _ in range(10)]
    await q.enqueue_many([(j, b"") for j in waiting])
    mover = _Crashing(conn, qname, at)
    assert await mover.take()
    await conn.command("HSET", record_key(qname), "moving", "4:1")
    with pytest.raises(RuntimeError, match="died"):
        await mover.drive(await read_record(conn, qname), 5.0)  # type: ignore[arg-type]
    await conn.command("DEL", f"emq:{{{qname}}}:reshard")  # its token expired
    ran: Counter[str] = Counter()

    async def handler(lease: Lease) -> None:
        ran[lease.id] += 1

    consumer = ShardedConsumer(AsyncShardedQueue(conn, qname, shards=2), handler,
                               options=ConsumerOptions(beat_ms=50, lease_ms=10_000, grace_s=5))
    running = asyncio.create_task(consumer.run())

    def committed() -> bool:
        return raw.hgetall(record_key(qname)) == {b"count": b"4", b"epoch": b"1"}

    await _until(lambda: committed() and set(ran) >= set(waiting))
    consumer.stop()
    await asyncio.wait_for(running, 30)
    assert all(n == 1 for n in ran.values()) and set(ran) == set(waiting)
    new = AsyncShardedQueue(conn, qname, shards=4)
    assert (await new.stats()).done == 30
    for job in done[:5]:
        assert await new.result(job, timeout=0) == job.encode()
        assert await new.enqueue(job, b"") is Verdict.DUPLICATE
