"""The crash-window scenario, shared by the fault test and ``bench/outbox_crash_table.py``.

Commit ``rows`` outbox rows (plain, on lanes, delayed), run ``echomq relay --drain`` as a
process with ``ECHOMQ_RELAY_CRASH_AT=point`` (it kills itself with SIGKILL there, in its
first batch), count the jobs it left, run a second relay to the end, and count again: every
row's payload must be on the queue exactly once and the outbox empty.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import psycopg
import redis
from redis.cluster import ClusterNode, RedisCluster

from echomq import AsyncClusterConnector
from echomq.outbox import Outbox, OutboxJob

ROOT = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class CrashRun:
    point: str
    rows: int
    exit_code: int
    jobs_after_kill: int
    jobs_after_rerun: int
    admitted_twice: int
    rerun_line: str


def relay_process(database_url: str, valkey_url: str, *args: str, crash_at: str | None = None,
                  timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``echomq relay --database-url ... --url ... ARGS`` in a process of its own."""
    env = {k: v for k, v in os.environ.items() if k not in ("ECHOMQ_URL", "ECHOMQ_RELAY_CRASH_AT")}
    env["PYTHONPATH"] = str(ROOT / "src")
    if crash_at:
        env["ECHOMQ_RELAY_CRASH_AT"] = crash_at
    code = "from echomq._entry import main; main()"
    return subprocess.run([sys.executable, "-c", code, "relay", "--database-url", database_url,
                           "--url", valkey_url, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def client(valkey_url: str) -> redis.Redis | RedisCluster:
    if valkey_url.startswith("redis+cluster://"):
        seeds = [ClusterNode(h, p) for h, p in AsyncClusterConnector.from_url(valkey_url).seeds]
        return RedisCluster(startup_nodes=seeds)
    return redis.Redis.from_url(valkey_url)


def payloads_on(raw: redis.Redis | RedisCluster, queue: str) -> list[bytes]:
    """The payload of every job row of ``queue`` (any state)."""
    out = []
    for key in raw.scan_iter(match=f"emq:{{{queue}}}:job:*", count=1000):
        out.append(raw.hget(key, "payload"))
    return [p for p in out if p is not None]


def commit_rows(database_url: str, queue: str, rows: int) -> list[bytes]:
    jobs = []
    for i in range(rows):
        payload = b"row-%d" % i
        if i % 5 == 1:
            jobs.append(OutboxJob(queue=queue, payload=payload, lane=f"lane-{i % 3}"))
        elif i % 5 == 2:
            jobs.append(OutboxJob(queue=queue, payload=payload, delay_ms=3_600_000))
        else:
            jobs.append(OutboxJob(queue=queue, payload=payload))
    with psycopg.connect(database_url) as db, db.transaction():
        Outbox().add_many(db, jobs)
    return [j.payload for j in jobs]


def outbox_rows(database_url: str) -> int:
    with psycopg.connect(database_url) as db:
        row = db.execute("SELECT count(*) FROM echomq_outbox").fetchone()
        assert row is not None
        return int(row[0])


def crash_run(database_url: str, valkey_url: str, queue: str, point: str, rows: int = 200,
              batch: int = 64) -> CrashRun:
    """The scenario (module docstring) on an empty outbox; the figures of one table row."""
    expected = commit_rows(database_url, queue, rows)
    raw = client(valkey_url)
    try:
        killed = relay_process(database_url, valkey_url, "--drain", "--batch", str(batch),
                               crash_at=point)
        after_kill = len(payloads_on(raw, queue))
        rerun = relay_process(database_url, valkey_url, "--drain", "--batch", str(batch))
        assert rerun.returncode == 0, rerun.stderr
        found = payloads_on(raw, queue)
    finally:
        raw.close()
    assert sorted(set(found)) == sorted(expected), "a committed row's job is missing"
    assert outbox_rows(database_url) == 0
    return CrashRun(point, rows, killed.returncode, after_kill, len(found),
                    len(found) - len(set(found)), rerun.stdout.strip().splitlines()[-1])
