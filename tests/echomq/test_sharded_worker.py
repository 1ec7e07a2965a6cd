"""Schedules onto a sharded queue (each tick admitted once, pinned to one shard) and
``echomq worker`` serving a sharded queue as one queue (a subprocess; jobs counted at the
server). On the single server and the 3+3 cluster."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from echomq import (
    AsyncScheduler,
    AsyncShardedQueue,
    Lease,
    Missed,
    Schedule,
    Verdict,
    generate,
    tick_of,
)
from echomq.protocol.sharding import ShardLayout

ROOT = Path(__file__).resolve().parents[2]
ECHOMQ = [sys.executable, "-c", "from echomq.ops.cli import main; main()"]


async def _until(cond: Any, within_s: float = 60.0) -> None:
    give_up = time.monotonic() + within_s
    while not cond():
        assert time.monotonic() < give_up, "condition not reached"
        await asyncio.sleep(0.02)


def test_a_schedule_is_pinned_to_one_shard_by_its_lane_or_its_name() -> None:
    layout = ShardLayout("orders", 3)
    plain = Schedule(name="nightly", queue="orders", every_ms=1000).on_shards(3)
    assert plain.queue == layout.names[layout.index("schedule:nightly")]
    laned = Schedule(name="nightly", queue="orders", every_ms=1000, lane="acct-7").on_shards(3)
    assert laned.queue == layout.names[layout.index("x", "acct-7")]
    assert laned.job_id(5000) == plain.job_id(5000)  # the id does not depend on the shard


async def test_two_schedulers_admit_each_tick_once_onto_a_sharded_queue(conn: Any, qname: str) -> None:
    q = AsyncShardedQueue(conn, qname, shards=3)
    await q.open()
    s = Schedule(name="two", queue=qname, every_ms=50, missed=Missed.CATCH_UP, max_catch_up=1000)
    a, b = AsyncScheduler(conn, [s], name="a"), AsyncScheduler(conn, [s], name="b")
    runs = [asyncio.create_task(x.run()) for x in (a, b)]
    await _until(lambda: a.admitted + b.admitted >= 20)
    a.stop()
    b.stop()
    await asyncio.gather(*runs)
    total = a.admitted + b.admitted
    jobs = sorted(v.id for v in await q.browse("pending", limit=1000))
    ticks = [tick_of(j) for j in jobs]
    assert len(jobs) == total and ticks == list(range(ticks[0], ticks[-1] + 1, 50))
    assert jobs == [s.job_id(t) for t in ticks]
    pinned = q.layout.names.index(s.on_shards(3).queue)
    assert [x.pending for x in await q.stats_by_shard()] == [
        total if i == pinned else 0 for i in range(3)]


async def test_a_worker_runs_a_sharded_queue_with_its_schedules(conn: Any, qname: str) -> None:
    from echomq.ops.worker import Worker, WorkerSettings

    ran: list[str] = []
    shards: set[str] = set()

    async def handle(job: Lease) -> None:
        ran.append(job.id)
        shards.add(job.queue)

    q = AsyncShardedQueue(conn, qname, shards=3)
    admitted = [generate("JOB") for _ in range(30)]  # about ten on each shard
    await q.enqueue_many([(i, b"") for i in admitted])
    assert {q.shard_for(i).name for i in admitted} == {s.name for s in q.shards}
    s = Schedule(name="w", queue=qname, every_ms=50, missed=Missed.CATCH_UP)
    settings = WorkerSettings(handlers={qname: handle}, schedules=[s], beat_ms=20, lease_ms=5000)
    workers = [Worker(settings, connector=conn, name=f"sharded-worker-{i}") for i in range(2)]
    tasks = [asyncio.create_task(w.run()) for w in workers]
    try:
        # every admitted job ran (on all three shards) and the schedule ticked on beside them
        await _until(lambda: set(admitted) <= set(ran) and len(ran) >= 40)
    finally:
        for w in workers:
            w.stop()
        await asyncio.gather(*tasks)
    assert len(ran) == len(set(ran)) and len(shards) == 3  # each job once, every shard served
    ticks = sorted(tick_of(j) for j in ran if j == s.job_id(tick_of(j)))  # the schedule's
    assert len(ticks) >= 10 and ticks == list(range(ticks[0], ticks[-1] + 1, 50))
    assert (await q.stats()).done == len(ran)


def test_echomq_worker_serves_a_sharded_queue(backend_url: str, qname: str) -> None:
    """``echomq worker ... --queue NAME --burst`` on a 3-shard queue: every job done once,
    counted at the server shard by shard; the exit line counts the same."""
    from echomq import ShardedQueue, connect

    conn = connect(backend_url)
    try:
        q = ShardedQueue(conn, qname, shards=3)
        jobs = [(generate("JOB"), b"", f"lane-{i % 30}") for i in range(300)]
        assert q.admit_many(jobs) == [Verdict.ENQUEUED] * 300
        done = subprocess.run(
            [*ECHOMQ, "worker", "tests.echomq.worker_targets:ok", "--queue", qname, "--url",
             backend_url, "--burst", "-c", "8", "--lease-ms", "10000"],
            cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        line = re.search(r"completed (\d+), failed (\d+), handed back (\d+)", done.stderr)
        assert line is not None and line.groups() == ("300", "0", "0"), done.stderr
        by_shard = q.stats_by_shard()
        assert sum(x.done for x in by_shard) == 300 and all(x.done > 0 for x in by_shard)
        assert all(x.pending == x.active == x.delayed == x.dead == 0 for x in by_shard)
    finally:
        conn.close()
