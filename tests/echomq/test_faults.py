"""Fault scenarios with real processes, on the single server and on the local cluster:
kill -9 of a consumer, SIGSTOP past the lease, and a server restart from its AOF (on the
cluster: kill -9 of the queue's primary, failover, and the node restarted from its AOF).
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import redis

from echomq import AsyncQueue, Queue, QueueOptions, Verdict, connect, connect_async, generate
from echomq.servers.local_cluster import LocalCluster
from echomq.servers.server import EmbeddedValkey
from tests.conftest import cluster_url
from tests.echomq.invariants import assert_consistent

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")


class Workers:
    """Child processes (consumers and holders) on one queue, ended by their pid."""

    def __init__(self, url: str, queue: str) -> None:
        self.url, self.queue = url, queue
        self.procs: list[subprocess.Popen[str]] = []

    def spawn(self, module: str, *args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen([sys.executable, "-m", module, self.url, self.queue, *args],
                                cwd=ROOT, stdout=subprocess.PIPE, text=True)
        self.procs.append(proc)
        return proc

    def start(self, *args: str) -> subprocess.Popen[str]:
        return self.spawn("tests.echomq.worker_proc", *args)

    def stop(self, proc: subprocess.Popen[str]) -> dict[str, int]:
        proc.send_signal(signal.SIGCONT)
        proc.send_signal(signal.SIGTERM)
        return last_json(proc)

    def cleanup(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
            proc.wait()
            if proc.stdout:
                proc.stdout.close()


def last_json(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


@pytest.fixture
def workers(backend_url: str, qname: str) -> Iterator[Workers]:
    w = Workers(backend_url, qname)
    yield w
    w.cleanup()


def log_lines(raw: Any, queue: str) -> list[list[str]]:
    """The children's log lines, split; ``start`` lines without their lease deadline."""
    return [x.decode().split()[:4] for x in raw.lrange(f"testlog:{{{queue}}}", 0, -1)]


def deadline_of_start(raw: Any, queue: str, job: str, attempt: int) -> int:
    for x in raw.lrange(f"testlog:{{{queue}}}", 0, -1):
        f = x.decode().split()
        if f[:3] == ["start", job, str(attempt)]:
            return int(f[4])
    raise AssertionError(f"no start of {job} attempt {attempt}")


def wait_until(predicate: Callable[[], T], timeout: float = 30.0) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError("condition not reached in time")


def ready(raw: Any, queue: str, proc: subprocess.Popen[str]) -> None:
    wait_until(lambda: ["ready", str(proc.pid)] in log_lines(raw, queue))


# ------------------------------------------------------------------------- consumers
def test_kill_9_mid_job_runs_again_elsewhere_once(workers: Workers, raw: Any, qname: str) -> None:
    lease_ms, beat_ms = 1000, 100
    a = workers.start("--sleep", "60", "--beat", str(beat_ms), "--lease", str(lease_ms))
    ready(raw, qname, a)
    conn = connect(workers.url)
    try:
        q = Queue(conn, qname)
        job = generate("JOB")
        assert q.enqueue(job, b"") is Verdict.ENQUEUED
        wait_until(lambda: ["start", job, "1", str(a.pid)] in log_lines(raw, qname))
        b = workers.start("--sleep", "0", "--beat", str(beat_ms), "--lease", str(lease_ms))
        ready(raw, qname, b)
        a.kill()
        a.wait()
        held_until = int(raw.zscore(f"emq:{{{qname}}}:active", job))  # a's last deadline
        wait_until(lambda: ["start", job, "2", str(b.pid)] in log_lines(raw, qname))
        # Not run again while the killed worker's lease was live (server clock).
        assert deadline_of_start(raw, qname, job, 2) - lease_ms >= held_until
        wait_until(lambda: q.stats().done == 1)
        stats = workers.stop(b)
        assert stats["completed"] == 1 and stats["lost"] == 0
        assert [x for x in log_lines(raw, qname) if x[0] == "start"] == [
            ["start", job, "1", str(a.pid)], ["start", job, "2", str(b.pid)]]
        assert assert_consistent(raw, qname) == {job: "done"}
    finally:
        conn.close()


def test_paused_consumer_past_its_lease_loses_it(workers: Workers, raw: Any, qname: str) -> None:
    """SIGSTOP past the lease: another consumer reaps and finishes the job; resumed, the
    paused one's heartbeat is refused, its handler is cancelled, it finishes nothing."""
    a = workers.start("--sleep", "60", "--beat", "100", "--lease", "600")
    ready(raw, qname, a)
    conn = connect(workers.url)
    try:
        q = Queue(conn, qname)
        job = generate("JOB")
        q.enqueue(job, b"")
        wait_until(lambda: ["start", job, "1", str(a.pid)] in log_lines(raw, qname))
        a.send_signal(signal.SIGSTOP)
        b = workers.start("--sleep", "0", "--beat", "100", "--lease", "600")
        wait_until(lambda: q.stats().done == 1)  # b reaped the expired lease and finished it
        # Resumed and stopped at once: a drains (grace 1 s) while its heartbeats go on.
        stats_a = workers.stop(a)
        stats_b = workers.stop(b)
        assert stats_a["lost"] == 1  # the heartbeat was refused
        assert stats_a["completed"] == stats_a["stale"] == stats_a["retried"] == 0
        assert stats_b["completed"] == 1
        row = raw.hgetall(f"emq:{{{qname}}}:job:{job}")
        assert row[b"state"] == b"done" and row[b"attempts"] == b"2"
    finally:
        conn.close()


def test_paused_holder_past_its_lease_is_refused_every_way(workers: Workers, raw: Any,
                                                           qname: str) -> None:
    """SIGSTOP past the lease, the job finished by another worker meanwhile: resumed, the
    old attempt's heartbeat AND its completion (and retry, and defer) are all refused."""
    conn = connect(workers.url)
    try:
        q = Queue(conn, qname)
        job = generate("JOB")
        q.enqueue(job, b"")
        holder = workers.spawn("tests.echomq.holder_proc", "500")
        wait_until(lambda: ["held", job, "1", str(holder.pid)] in log_lines(raw, qname))
        holder.send_signal(signal.SIGSTOP)
        b = workers.start("--sleep", "0", "--beat", "50", "--lease", "500")
        wait_until(lambda: q.stats().done == 1)
        holder.send_signal(signal.SIGCONT)
        out = last_json(holder)
        assert out["heartbeat"] == "lost"
        assert (out["complete"], out["retry"], out["defer"]) == ("stale", "stale", "stale")
        assert workers.stop(b)["completed"] == 1
        row = raw.hgetall(f"emq:{{{qname}}}:job:{job}")
        assert row[b"state"] == b"done" and row[b"attempts"] == b"2"
        assert assert_consistent(raw, qname) == {job: "done"}
    finally:
        conn.close()


# --------------------------------------------------------------------------- servers
class Load:
    """Admits batches until stopped; keeps every id the server acknowledged."""

    def __init__(self, queue: AsyncQueue) -> None:
        self.queue, self.acked, self.refused = queue, [], 0  # type: ignore[var-annotated]
        self.stopped = asyncio.Event()

    async def run(self, batches: int) -> None:
        for _ in range(batches):
            batch = [(generate("JOB"), b"x") for _ in range(50)]
            verdicts = await self.queue.enqueue_many(batch)
            for (jid, _), v in zip(batch, verdicts, strict=True):
                if v in (Verdict.ENQUEUED, Verdict.DUPLICATE):  # a resend answers DUPLICATE
                    self.acked.append(jid)
                else:
                    self.refused += 1  # NotDurable: written to too few replicas, not acked
            await asyncio.sleep(0.02)  # a steady producer, not a flood



async def eventually(check: Callable[[], Any], within: float, what: str) -> Any:
    """Poll ``check`` (a function, or a coroutine function) until truthy, within a bound."""
    deadline = time.monotonic() + within
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        assert time.monotonic() < deadline, f"{what}: not reached in {within} s"
        await asyncio.sleep(0.02)


async def done_count(queue: AsyncQueue) -> int:
    return (await queue.stats()).done


async def settled(queue: AsyncQueue) -> bool:
    """Nothing pending, running or delayed (one atomic read of the counts)."""
    s = await queue.stats()
    return s.done > 0 and s.pending == s.active == s.delayed == 0


async def done_at_least(queue: AsyncQueue, n: int) -> bool:
    return await done_count(queue) >= n


async def test_server_kill_9_under_load_keeps_every_acknowledged_job() -> None:
    server = EmbeddedValkey().start()
    w = Workers(server.url, "load")
    conn = connect_async(server.url, retry_budget_s=30)
    try:
        q = AsyncQueue(conn, "load")
        worker = w.start("--sleep", "0.001", "--beat", "50", "--lease", "2000")
        load = Load(q)
        producer = asyncio.create_task(load.run(60))
        await eventually(lambda: len(load.acked) >= 500, 60, "500 jobs acknowledged")
        done_before = await done_count(q)
        server.kill()
        await asyncio.sleep(0.5)  # the outage: the server stays down this long
        server.start()  # from its AOF
        await producer
        assert len(load.acked) == 3000
        await eventually(lambda: done_at_least(q, 3000), 90, "all 3000 jobs done")
        raw = redis.Redis.from_url(server.url)
        where = assert_consistent(raw, "load")
        raw.close()
        assert set(load.acked) <= set(where) and set(where.values()) == {"done"}
        stats = w.stop(worker)
        # A completion whose reply died with the server is resent and answered stale:
        # the job is done once either way (done == 3000 above).
        assert stats["completed"] + stats["stale"] >= 3000
        assert done_before < 3000  # the same worker process drained across the outage
    finally:
        await conn.aclose()
        w.cleanup()
        server.cleanup()


@pytest.fixture
def own_cluster() -> Iterator[LocalCluster]:
    with LocalCluster(primaries=3, replicas_per_primary=1, node_timeout_ms=2000) as cluster:
        yield cluster


@pytest.mark.cluster
@pytest.mark.timeout(180)
async def test_primary_kill_9_failover_and_restart_under_load(own_cluster: LocalCluster) -> None:
    """The queue's primary is killed -9 under load: its replica takes over, the consumer
    rides it out, the killed node restarts from its AOF and rejoins as a replica. With
    durable admission no acknowledged job is lost; every job ends done, none stuck."""
    cluster = own_cluster
    url = cluster_url(cluster)
    w = Workers(url, "failover")
    conn = connect_async(url, retry_budget_s=30)
    raw = None
    try:
        q = AsyncQueue(conn, "failover",
                       options=QueueOptions(durable_replicas=1, durable_timeout_ms=500))
        primary = cluster.primary_for_key(q.keys["pending"])
        replica = cluster.replica_of(primary)
        worker = w.start("--sleep", "0.001", "--beat", "50", "--lease", "2000")
        load = Load(q)
        producer = asyncio.create_task(load.run(40))
        await eventually(lambda: len(load.acked) >= 300, 60, "300 jobs acknowledged")
        done_before = await done_count(q)
        cluster.kill_node(primary)
        await eventually(lambda: replica.role == "primary", 30, "replica promoted")
        cluster.restart_node(primary)  # same port and data directory: its AOF
        await asyncio.to_thread(cluster.wait_healthy, 60)
        assert primary.role == "replica" and cluster.replica_of(replica) is primary
        await producer
        assert len(load.acked) + load.refused == 2000 and len(load.acked) > 300
        # Every job present ends done, acknowledged or not: nothing lost, nothing stuck.
        await eventually(lambda: settled(q), 90, "every job done")
        stats = w.stop(worker)
        raw = cluster_client(cluster)
        where = assert_consistent(raw, "failover")
        assert set(where.values()) == {"done"}
        assert set(load.acked) <= set(where)  # no acknowledged job lost
        assert stats["completed"] + stats["stale"] >= len(where)
        assert done_before < len(where)  # the same worker process drained across the failover
    finally:
        if raw is not None:
            raw.close()
        await conn.aclose()
        w.cleanup()


def cluster_client(cluster: LocalCluster) -> Any:
    from redis.cluster import ClusterNode, RedisCluster

    return RedisCluster(startup_nodes=[ClusterNode(h, p) for h, p in cluster.startup_nodes])


# ----------------------------------------------------------------------------- upkeep
async def test_100k_expired_leases_are_reaped_in_bounded_calls(own_server: EmbeddedValkey) -> None:
    """Reap works through a 100k backlog in calls of at most ``reap_batch`` jobs each and
    loses none. (How long each call holds the server is measured in bench/reap_calls.py.)"""
    conn = connect_async(own_server.url)
    try:
        q = AsyncQueue(conn, "reap")
        n, batch = 100_000, q.options.reap_batch
        items = [(generate("JOB"), b"") for _ in range(n)]
        assert (await q.enqueue_many(items)).count(Verdict.ENQUEUED) == n
        claimed = []
        while len(claimed) < n:
            claimed += await q.claim(1000, lease_ms=1, window=1000)
        last = max(x.deadline_ms for x in claimed)
        raw = redis.Redis.from_url(own_server.url)
        await eventually(lambda: int(raw.time()[0]) * 1000 + int(raw.time()[1]) // 1000 > last,
                         10, "the server clock past every lease")
        raw.close()
        sizes = []
        while sum(sizes) < n:
            requeued, dead = await q.reap()
            assert dead == 0 and 0 < requeued <= batch
            sizes.append(requeued)
        assert len(sizes) == n // batch and set(sizes) == {batch}
        assert await q.reap() == (0, 0)
        stats = await q.stats()
        assert (stats.pending, stats.active) == (n, 0)
    finally:
        await conn.aclose()
