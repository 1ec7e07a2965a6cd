"""The worker's Prometheus endpoint: conventional names and labels, never a job id."""

from __future__ import annotations

import asyncio
import re
import urllib.request
from typing import Any

from echomq import AsyncQueue, generate
from echomq.ops.metrics import QueueMetrics
from echomq.ops.worker import Worker, WorkerSettings
from tests.echomq import worker_targets
from tests.echomq._async.support import wait_for
from tests.echomq.test_flows import other_slot


def _scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as reply:
        return str(reply.read().decode())


async def test_a_worker_serves_prometheus_metrics(conn: Any, qname: str) -> None:
    q, bad = AsyncQueue(conn, qname), AsyncQueue(conn, qname + "-bad")
    ids = [generate("JOB") for _ in range(10)]
    await q.enqueue_many([(i, b"") for i in ids])
    await bad.enqueue(generate("JOB"), b"")
    settings = WorkerSettings(handlers={q.name: worker_targets.ok, bad.name: worker_targets.boom},
                              beat_ms=20, lease_ms=5000, metrics_port=0)
    worker = Worker(settings, connector=conn)
    task = asyncio.create_task(worker.run())
    try:
        async def settled() -> bool:
            # The server's count, then the consumer's own: a completion is counted when the
            # consumer reads its flush's reply, which can be after another connection
            # already sees the job done.
            failed = await bad.stats()
            mine, theirs = worker.consumers.get(q.name), worker.consumers.get(bad.name)
            return ((await q.stats()).done == 10 and failed.delayed + failed.dead == 1
                    and mine is not None and mine.stats.completed == 10
                    and theirs is not None and theirs.stats.retried + theirs.stats.dead == 1)
        await wait_for(settled, within=20)
        worker.metrics.sync_counters()
        await worker.metrics.refresh(conn, [q.name, bad.name])
        text = await asyncio.to_thread(_scrape, worker.metrics.url)
    finally:
        worker.stop()
        await asyncio.wait_for(task, 20)
    assert f'echomq_jobs{{queue="{q.name}",state="done"}} 10.0' in text
    assert f'echomq_jobs_completed_total{{queue="{q.name}"}} 10.0' in text
    assert f'echomq_jobs_retried_total{{queue="{bad.name}"}} 1.0' in text
    assert f'echomq_handler_duration_seconds_count{{outcome="processed",queue="{q.name}"}} 10.0' in text
    assert f'echomq_handler_duration_seconds_count{{outcome="failed",queue="{bad.name}"}} 1.0' in text
    assert f'echomq_claim_to_start_seconds_count{{queue="{q.name}"}} 10.0' in text
    assert f'echomq_workers{{queue="{q.name}"}} 1.0' in text
    for family in ("echomq_jobs_handed_back_total", "echomq_jobs_reaped_total", "echomq_leases_lost_total",
                   "echomq_leases_overdue", "echomq_oldest_pending_age_seconds"):
        assert family in text
    # Prometheus conventions: counters end in _total, durations in _seconds, no job id anywhere.
    for line in text.splitlines():
        if line.startswith("# TYPE echomq_"):
            name, kind = line.split()[2:4]
            assert kind != "counter" or name.endswith("_total"), line
            assert kind != "histogram" or name.endswith("_seconds"), line
    assert not any(i in text for i in ids) and not re.search(r"JOB[0-9A-Z]{26}", text)


async def test_flows_waiting_and_released_are_counted(conn: Any, qname: str) -> None:
    q, kids = AsyncQueue(conn, qname), AsyncQueue(conn, other_slot(qname))
    pids = [generate("JOB") for _ in range(3)]
    for pid in pids:
        children = [(kids.name, generate("JOB"), b"") for _ in range(4)]
        assert await q.admit_flow(parent=(pid, b""), children=children)
    for _ in range(2):  # children in the parent's queue: released by the child's own script
        same = [(q.name, generate("JOB"), b"") for _ in range(2)]
        assert await q.admit_flow(parent=(generate("JOB"), b""), children=same)
    settings = WorkerSettings(handlers={q.name: worker_targets.ok, kids.name: worker_targets.ok},
                              beat_ms=20, lease_ms=5000, metrics_port=0)
    early = QueueMetrics()  # what any process reads from the server, before any child ran
    await early.refresh(conn, [q.name, kids.name])
    before = early.exposition().decode()
    worker = Worker(settings, connector=conn)
    task = asyncio.create_task(worker.run())
    try:
        async def released() -> bool:
            mine = worker.consumers.get(kids.name)
            return (await q.stats()).done == 3 + 2 + 4 and mine is not None and mine.stats.flows_released == 3
        await wait_for(released, within=20)
        worker.metrics.sync_counters()
        await worker.metrics.refresh(conn, [q.name, kids.name])
        text = await asyncio.to_thread(_scrape, worker.metrics.url)
    finally:
        worker.stop()
        await asyncio.wait_for(task, 20)
    assert f'echomq_flows_waiting{{queue="{q.name}"}} 5.0' in before
    assert f'echomq_flow_parents_released{{queue="{q.name}"}} 0.0' in before
    assert f'echomq_flow_children_held{{queue="{kids.name}"}} 0.0' in before  # started at admission
    assert f'echomq_flows_waiting{{queue="{q.name}"}} 0.0' in text
    assert f'echomq_flows_released_total{{queue="{kids.name}"}} 3.0' in text  # the relay's 3
    # the server's count: the relay's 3 and the 2 released by their same-queue child's script
    assert f'echomq_flow_parents_released{{queue="{q.name}"}} 5.0' in text
    assert f'echomq_flow_parents_failed{{queue="{q.name}"}} 0.0' in text
    assert f'echomq_flow_notices{{queue="{kids.name}"}} 0.0' in text
    assert f'echomq_flows_failed_total{{queue="{kids.name}"}}' not in text  # none failed
