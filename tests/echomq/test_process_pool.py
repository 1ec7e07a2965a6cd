"""The process pool (``pool="process"``, decision 0035): the parent keeps the lease and its
heartbeats, a child computes; a timeout kills the child before the attempt is handed back,
a child that dies is a failed attempt, and ``echomq worker --pool process`` serves with it.
The handlers are ``tests.echomq.pool_targets``; each appends ``pid attempt others`` per
attempt to a file of its test, so what ran where is read from outside the processes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from echomq import AsyncQueue, HandlerCrashed, HandlerTimeout, InvalidArgument, Lease, QueueOptions, generate
from echomq.core.failures import parse_failure
from echomq.core.hooks import Hooks
from echomq.core.outcomes import BackoffPolicy
from echomq.ops.worker import WorkerSettings
from echomq.runtime.consumer import Consumer, ConsumerOptions
from echomq.runtime.process_pool import handler_path
from tests import procfs
from tests.echomq import pool_targets
from tests.echomq._async.support import wait_for
from tests.echomq.test_worker import ECHOMQ, ROOT

T = "tests.echomq.pool_targets:"
FAST = BackoffPolicy(base_ms=10, max_ms=50)


@contextlib.asynccontextmanager
async def running(consumer: Consumer) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(consumer.run())
    try:
        yield task
    finally:
        consumer.stop(hurry=True)
        await asyncio.wait_for(task, 20)


def _runs(folder: Path) -> list[list[str]]:
    runs = folder / "runs"
    return [line.split() for line in runs.read_text().splitlines()] if runs.exists() else []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def _state(q: AsyncQueue, job: str) -> str:
    row = await q.job(job)
    return row["state"].decode() if row else ""


async def _ends(q: AsyncQueue, job: str, state: str, within: float = 30) -> None:
    async def there() -> bool:
        return await _state(q, job) == state
    await wait_for(there, within=within)


def test_a_handler_a_child_cannot_import_is_refused_before_anything_runs() -> None:
    async def coro(lease: Lease) -> None: ...

    def nested(lease: Lease) -> None: ...

    for bad in (lambda lease: None, nested, coro, pool_targets.pid.__call__, T + "missing",
                "tests.echomq.nowhere:pid", "no-colon"):
        with pytest.raises(InvalidArgument):
            handler_path(bad)
    assert handler_path(pool_targets.pid) == T + "pid" == handler_path(T + "pid")
    with pytest.raises(InvalidArgument, match="pool must be"):
        ConsumerOptions(pool="fork")
    with pytest.raises(InvalidArgument, match="module-level function"):
        WorkerSettings(handlers={"q": lambda lease: None}, pool="process")
    with pytest.raises(InvalidArgument, match="cannot import"):
        WorkerSettings(handlers={"q": "tests.echomq.nowhere:pid"})
    assert WorkerSettings(handlers={"q": T + "pid"}, pool="process").pool == "process"


async def test_a_handler_holding_the_gil_past_its_lease_keeps_it_and_runs_once(
        queue: AsyncQueue, tmp_path: Path) -> None:
    """The child holds its GIL for 1 s (a C call) then busy-loops 1 s in Python, against a
    lease of 600 ms: the parent's heartbeats keep the lease, the job completes at attempt 1."""
    job = generate("JOB")
    await queue.enqueue(job, json.dumps({"dir": str(tmp_path), "seconds": 1}).encode())
    consumer = Consumer(queue, T + "hold_gil", options=ConsumerOptions(
        pool="process", beat_ms=100, lease_ms=600, concurrency=1))
    async with running(consumer):
        await _ends(queue, job, "done")
    row = await queue.job(job)
    assert row is not None and row["attempts"] == b"1"
    child = json.loads(row["result"])["pid"]
    assert child != os.getpid()
    assert [r[:2] for r in _runs(tmp_path)] == [[str(child), "1"]]  # ran once, in the child
    assert (consumer.stats.lost, consumer.stats.stale, consumer.stats.completed) == (0, 0, 1)


@pytest.mark.slow
async def test_a_handler_that_never_returns_is_killed_before_its_retry_starts(
        queue: AsyncQueue, tmp_path: Path) -> None:
    """At its 500 ms timeout the child (which ignores SIGTERM) is killed and reaped, then
    the attempt is failed: the retry's first act finds the old process gone. Dead at 2."""
    q = AsyncQueue(queue.connector, queue.name, options=QueueOptions(max_attempts=2))
    job = generate("JOB")
    await q.enqueue(job, json.dumps({"dir": str(tmp_path)}).encode())
    failures: list[BaseException] = []
    consumer = Consumer(q, T + "forever", hooks=Hooks(on_failure=[lambda _, e, s: failures.append(e)]),
                        options=ConsumerOptions(pool="process", beat_ms=50, lease_ms=60_000,
                                                concurrency=1, timeout_ms=500, kill_grace_s=1.0,
                                                backoff=FAST))
    async with running(consumer):
        await _ends(q, job, "dead")
    (first, one, earlier), (second, two, others) = _runs(tmp_path)
    assert (one, earlier, two) == ("1", "-", "2")
    assert others == f"{first}:gone"  # gone when the retry started, not merely later
    assert not _alive(int(first)) and not _alive(int(second))
    assert [type(e) for e in failures] == [HandlerTimeout, HandlerTimeout]
    row = await q.job(job)
    assert row is not None and parse_failure(row["error"]).type == "HandlerTimeout"
    assert consumer.processes is not None and consumer.processes.started == 2


@pytest.mark.slow
async def test_what_a_killed_child_started_dies_with_it(queue: AsyncQueue, tmp_path: Path) -> None:
    """The child leads its own process group: at the timeout the group is killed, so a
    process the handler started does not outlive the attempt either."""
    q = AsyncQueue(queue.connector, queue.name, options=QueueOptions(max_attempts=1))
    job = generate("JOB")
    await q.enqueue(job, json.dumps({"dir": str(tmp_path)}).encode())
    consumer = Consumer(q, T + "spawns_then_hangs", options=ConsumerOptions(
        pool="process", beat_ms=50, lease_ms=60_000, concurrency=1, timeout_ms=500,
        kill_grace_s=0.2))
    async with running(consumer):
        await _ends(q, job, "dead")
    grandchild = int((tmp_path / "grandchild").read_text())
    assert not procfs.alive(grandchild, "sleep 600")  # gone, or a zombie left to init


@pytest.mark.slow
@pytest.mark.parametrize("how", ["SIGKILL", "SIGSEGV", "exit"])
async def test_a_handler_that_kills_itself_fails_its_attempt_and_the_worker_serves_on(
        queue: AsyncQueue, tmp_path: Path, how: str) -> None:
    q = AsyncQueue(queue.connector, queue.name, options=QueueOptions(max_attempts=3))
    job, then = generate("JOB"), generate("JOB")
    failures: list[BaseException] = []
    consumer = Consumer(q, T + "crash_first", hooks=Hooks(on_failure=[lambda _, e, s: failures.append(e)]),
                        options=ConsumerOptions(pool="process", beat_ms=50, lease_ms=60_000,
                                                concurrency=1, backoff=FAST))
    await q.enqueue(job, json.dumps({"dir": str(tmp_path), "how": how}).encode())
    async with running(consumer):
        await _ends(q, job, "done")
        await q.enqueue(then, json.dumps({"dir": str(tmp_path / "then"), "how": "none"}).encode())
        (tmp_path / "then").mkdir()
        await _ends(q, then, "done")
    (crashed, _, _), (survivor, attempt, others) = _runs(tmp_path)
    assert (attempt, others) == ("2", f"{crashed}:gone")
    row = await q.job(job)
    assert row is not None and row["result"] == f"survived {survivor}".encode()
    assert [type(e) for e in failures] == [HandlerCrashed]
    assert re.search("killed by SIGKILL" if how == "SIGKILL" else "killed by SIGSEGV"
                     if how == "SIGSEGV" else "exited with status 3", str(failures[0]))
    assert consumer.processes is not None and consumer.processes.started == 2  # the dead child replaced
    assert consumer.stats.completed == 2 and consumer.stats.retried == 1


async def test_a_handler_exception_in_the_child_is_a_failed_attempt_with_its_traceback(
        queue: AsyncQueue) -> None:
    q = AsyncQueue(queue.connector, queue.name, options=QueueOptions(max_attempts=1))
    job = generate("JOB")
    await q.enqueue(job, b"")
    consumer = Consumer(q, pool_targets.fails, options=ConsumerOptions(pool="process", concurrency=1))
    async with running(consumer):
        await _ends(q, job, "dead")
    row = await q.job(job)
    assert row is not None
    error = parse_failure(row["error"])
    assert (error.type, error.message) == ("ValueError", f"no good: {job}")
    assert "pool_targets.py" in error.traceback  # the child's own traceback


def test_echomq_worker_pool_process_serves_jobs_in_child_processes(valkey_url: str, qname: str) -> None:
    """``echomq worker --pool process`` as an operator runs it: every job ran in a child."""
    from echomq import Connector, Queue

    conn = Connector.from_url(valkey_url)
    q = Queue(conn, qname)
    jobs = [generate("JOB") for _ in range(6)]
    q.enqueue_many([(j, b"") for j in jobs])
    proc = subprocess.Popen([*ECHOMQ, "worker", T + "pid", "--queue", qname, "--url", valkey_url,
                             "--pool", "process", "--concurrency", "2", "--burst"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "completed 6, failed 0" in err
    pids = {json.loads(q.result(j))["pid"] for j in jobs}
    assert proc.pid not in pids and 1 <= len(pids) <= 2  # one child per slot at most, reused
    assert all(not _alive(p) for p in pids)  # the children ended with the worker
    conn.close()


async def test_at_stop_a_running_child_is_killed_then_its_job_handed_back(
        queue: AsyncQueue, tmp_path: Path) -> None:
    job = generate("JOB")
    await queue.enqueue(job, json.dumps({"dir": str(tmp_path)}).encode())
    consumer = Consumer(queue, T + "forever", options=ConsumerOptions(
        pool="process", beat_ms=50, lease_ms=60_000, concurrency=1, grace_s=0.1, kill_grace_s=0.2))
    task = asyncio.create_task(consumer.run())
    async def started() -> bool:
        return bool(_runs(tmp_path))
    await wait_for(started, within=20)
    consumer.stop()
    await asyncio.wait_for(task, 20)
    [(child, _, _)] = _runs(tmp_path)
    assert not _alive(int(child))
    assert await _state(queue, job) == "pending"  # handed back at once: no lease to wait out
    assert consumer.stats.handed_back == 1


async def test_a_sharded_consumer_runs_its_shards_handlers_in_child_processes(conn: Any, qname: str) -> None:
    from echomq import AsyncShardedQueue, ShardedConsumer

    q = AsyncShardedQueue(conn, qname, shards=3)
    jobs = [generate("JOB") for _ in range(6)]
    await q.admit_many([(j, b"", f"lane-{n}") for n, j in enumerate(jobs)])  # lanes spread them
    consumer = ShardedConsumer(q, pool_targets.pid, options=ConsumerOptions(
        pool="process", concurrency=3, beat_ms=50))
    task = asyncio.create_task(consumer.run())
    try:
        async def all_done() -> bool:
            return (await q.stats()).done == 6
        await wait_for(all_done, within=30)
    finally:
        consumer.stop(hurry=True)
        await asyncio.wait_for(task, 20)
    pids = {json.loads(await q.result(j))["pid"] for j in jobs}
    assert os.getpid() not in pids and all(not _alive(p) for p in pids)


async def test_a_cancel_request_kills_the_running_child_then_the_job_ends_cancelled(
        queue: AsyncQueue, tmp_path: Path) -> None:
    from echomq import CancelOutcome

    job = generate("JOB")
    await queue.enqueue(job, json.dumps({"dir": str(tmp_path)}).encode())
    consumer = Consumer(queue, T + "forever", options=ConsumerOptions(
        pool="process", beat_ms=50, lease_ms=60_000, concurrency=1, kill_grace_s=0.2))
    async with running(consumer):
        async def started() -> bool:
            return bool(_runs(tmp_path))
        await wait_for(started, within=20)
        assert await queue.cancel([job]) == [CancelOutcome.ASKED]
        await _ends(queue, job, "cancelled")
        [(child, _, _)] = _runs(tmp_path)
        assert not _alive(int(child))  # killed (it ignores SIGTERM: SIGKILL), then finished
    assert consumer.stats.cancelled == 1


@pytest.mark.slow
def test_a_child_dies_with_its_worker_killed_by_sigkill(valkey_url: str, qname: str, tmp_path: Path) -> None:
    """kill -9 of ``echomq worker --pool process``: its running child does not go on alone
    (PR_SET_PDEATHSIG); the job comes back by reap as after any crash."""
    import signal
    import time

    from echomq import Connector, Queue

    conn = Connector.from_url(valkey_url)
    Queue(conn, qname).enqueue(generate("JOB"), json.dumps({"dir": str(tmp_path)}).encode())
    conn.close()
    proc = subprocess.Popen([*ECHOMQ, "worker", T + "forever", "--queue", qname, "--url", valkey_url,
                             "--pool", "process", "--concurrency", "1"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not _runs(tmp_path):
            assert proc.poll() is None and time.monotonic() < deadline, "the child never ran"
            time.sleep(0.02)
        [(child, _, _)] = _runs(tmp_path)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 10
        while procfs.alive(int(child)):
            assert time.monotonic() < deadline, "the child outlived its worker"
            time.sleep(0.02)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
