"""``echomq worker``: settings, failures kept with their traceback, registration, burst, and a
graceful SIGTERM that hands in-flight jobs back at once (the shutdown figures are printed)."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from echomq import AsyncQueue, Connector, Queue, generate
from echomq.client.info import queue_info
from echomq.core.failures import parse_failure
from echomq.ops.worker import Worker, WorkerSettings, load_target, settings_for
from tests.echomq import worker_targets
from tests.echomq._async.support import wait_for

ROOT = Path(__file__).resolve().parents[2]
ECHOMQ = [sys.executable, "-c", "from echomq.ops.cli import main; main()"]


def test_settings_refuse_bad_input_before_anything_starts() -> None:
    with pytest.raises(ValueError, match="at least one queue"):
        WorkerSettings(handlers={})
    with pytest.raises(ValueError, match="brace"):
        WorkerSettings(handlers={"a{b}": worker_targets.ok})
    with pytest.raises(ValueError, match="three beats"):
        WorkerSettings(handlers={"q": worker_targets.ok}, beat_ms=100, lease_ms=200)
    with pytest.raises(ValueError, match="give --queue"):
        settings_for(worker_targets.ok)
    with pytest.raises(ValueError, match="cannot import"):
        load_target("no_such_module_here:handler")
    with pytest.raises(ValueError, match="has no attribute"):
        load_target("tests.echomq.worker_targets:nothing")
    cls = settings_for(load_target("tests.echomq.worker_targets:Settings"), concurrency=9)
    assert cls.concurrency == 9 and cls.burst is True


async def test_a_worker_runs_its_queues_keeps_failures_and_registers(conn: Any, qname: str) -> None:
    good, bad = AsyncQueue(conn, qname), AsyncQueue(conn, qname + "-bad")
    await good.enqueue_many([(generate("JOB"), b"") for _ in range(20)])
    failing = generate("JOB")
    await bad.enqueue(failing, b"")
    settings = WorkerSettings(handlers={good.name: worker_targets.ok, bad.name: worker_targets.boom},
                              beat_ms=20, lease_ms=5000, registry_beat_s=0.1, registry_ttl_s=1)
    worker = Worker(settings, connector=conn, name="test-worker")
    task = asyncio.create_task(worker.run())
    try:
        async def settled() -> bool:
            row = await bad.job(failing)
            return (await good.stats()).done == 20 and row is not None and "failures" in row
        await wait_for(settled, within=20)
        names = [w.name for w in (await queue_info(conn, good.name)).workers]
        assert names == ["test-worker"]
    finally:
        worker.stop()
        report = await asyncio.wait_for(task, 20)
    assert report.completed == 20 and report.failed >= 1 and report.handed_back == 0
    row = await bad.job(failing)
    assert row is not None
    err = parse_failure(row["error"])
    assert (err.type, err.message) == ("RuntimeError", f"boom on {failing}")
    assert err.traceback.startswith("Traceback (most recent call last):")
    assert "worker_targets.py" in err.traceback and len(row["error"]) <= 4200
    assert (await queue_info(conn, good.name)).workers == []  # deregistered at exit


async def test_burst_mode_stops_when_the_queue_is_empty(conn: Any, qname: str) -> None:
    q = AsyncQueue(conn, qname)
    await q.enqueue_many([(generate("JOB"), b"") for _ in range(30)])
    settings = WorkerSettings(handlers={qname: worker_targets.ok}, burst=True, beat_ms=20, lease_ms=5000)
    report = await asyncio.wait_for(Worker(settings, connector=conn).run(), 30)
    assert report.completed == 30 and (await q.stats()).done == 30


def _worker_cmd(url: str, queue: str, *extra: str) -> list[str]:
    return [*ECHOMQ, "worker", "tests.echomq.worker_targets:slow", "--queue", queue, "--url", url,
            "--concurrency", "8", "--lease-ms", "60000", *extra]


@pytest.mark.parametrize(("grace", "signals"), [("30", (signal.SIGTERM, signal.SIGINT)),
                                                 ("0.3", (signal.SIGTERM,))])
def test_sigterm_hands_in_flight_jobs_back_and_exits_0(valkey_url: str, qname: str, grace: str,
                                                       signals: tuple[signal.Signals, ...]) -> None:
    """SIGTERM (after the grace period), or SIGTERM then SIGINT (at once): the 8 jobs in
    flight go back to pending within a second or two, not after their 60 s lease."""
    client = redis.Redis.from_url(valkey_url)
    conn = Connector.from_url(valkey_url)
    q = Queue(conn, qname)
    q.enqueue_many([(generate("JOB"), b"") for _ in range(12)])
    proc = subprocess.Popen(_worker_cmd(valkey_url, qname, "--grace", grace), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while client.zcard(f"emq:{{{qname}}}:active") < 8:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the worker never claimed 8 jobs"
            time.sleep(0.02)
        t0 = time.monotonic()
        for sig in signals:
            proc.send_signal(sig)
            time.sleep(0.05)
        _, err = proc.communicate(timeout=30)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    line = re.search(r"stopped in ([\d.]+)s; completed (\d+), failed (\d+), handed back (\d+)", err)
    assert line is not None, err
    assert int(line.group(4)) == 8
    counts = q.stats()
    assert (counts.pending, counts.active) == (12, 0)
    for job in client.zrange(f"emq:{{{qname}}}:pending", 0, -1):
        row = client.hgetall(f"emq:{{{qname}}}:job:{job.decode()}")
        assert b"failures" not in row  # handed back: no failure counted
    assert client.zcard(f"emq:{{{qname}}}:workers") == 0
    # The figures for the report: time from the signal to exit, jobs handed back.
    print(f"\nshutdown (grace {grace}, signals {[s.name for s in signals]}): exit {took:.2f}s "
          f"after the signal (worker's own figure {line.group(1)}s), handed back {line.group(4)}")
    assert took < 15
    conn.close()
    client.close()
