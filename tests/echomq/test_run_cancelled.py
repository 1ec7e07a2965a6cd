"""Cancelling a runner ends it, and nothing it held runs on (the cancellation audit, Python
3.11 asyncio), on both topologies:

* a Consumer's ``run()`` cancelled while it drains starts none of the jobs it leased ahead
  of its handlers, on the task path and on the handler threads; their leases, and those of
  the handlers it cancelled, expire and reap makes the jobs pending again (nothing stuck);
* a Supervisor cancelled while it restarts its children ends cancelled once they are down,
  and restarts nothing;
* a process-pool attempt cancelled (a hurried stop) while its timed-out child is being
  killed ends cancelled once the child is gone: its job is handed back, no failure counted.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis

from echomq import AsyncQueue, Lease, generate
from echomq.runtime.consumer import Consumer, ConsumerOptions
from echomq.runtime.supervisor import ChildSpec, Supervisor
from tests.echomq._async.support import wait_for
from tests.echomq.invariants import assert_consistent
from tests.echomq.test_process_pool import T, _alive, _runs, _state

# Two handlers at once and, with a deep backlog, two leases held ahead of them; short
# leases so that those a cancelled run() leaves behind expire within the test.
OPTS = ConsumerOptions(concurrency=2, beat_ms=20, lease_ms=1000, grace_s=5.0)
JOBS = 40  # more than the peek window (2 * concurrency + 16): the consumer leases ahead


async def _until(condition: Callable[[], object], within: float = 10.0) -> None:
    async def holds() -> bool:
        return bool(condition())
    await wait_for(holds, within=within)


def _still_running(consumer: Consumer) -> list[asyncio.Task[object]]:
    """The consumer's tasks not ended (its loops are named ``<name>:beat`` and so on, each
    handler task ``<name>:<job id>``)."""
    return [t for t in asyncio.all_tasks() if t.get_name().startswith(f"{consumer.name}:")]


async def _reaped(queue: AsyncQueue, jobs: int) -> None:
    """Reap until ``jobs`` expired leases were re-exposed (the consumer's upkeep is gone)."""
    total = 0

    async def back() -> bool:
        nonlocal total
        total += sum(await queue.upkeep.reap())
        return total >= jobs
    await wait_for(back, within=15)


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 10)


async def test_a_cancelled_run_starts_none_of_the_jobs_it_leased_ahead(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    started: list[str] = []

    async def handler(lease: Lease) -> None:
        started.append(lease.id)
        await asyncio.Event().wait()  # runs until cancelled

    await queue.enqueue_many([(generate("JOB"), b"") for _ in range(JOBS)])
    consumer = Consumer(queue, handler, options=OPTS)
    task = asyncio.create_task(consumer.run())
    await _until(lambda: len(started) == 2 and consumer.in_flight == 4)  # 2 run, 2 wait
    await _cancel(task)
    # Each handler cancelled freed its slot for a lease held ahead, which used to start a
    # handler task there and then, running after run() had ended, without heartbeats.
    assert _still_running(consumer) == []
    assert len(started) == 2
    await _reaped(queue, 4)  # the four leases expire: nothing stuck, nothing lost
    assert list(assert_consistent(raw, queue.name).values()) == ["pending"] * JOBS


async def test_a_cancelled_run_runs_no_job_waiting_for_a_handler_thread(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    started: list[str] = []
    go = threading.Event()

    def handler(lease: Lease) -> None:  # a blocking handler without hooks: direct runs
        started.append(lease.id)
        go.wait(30)

    await queue.enqueue_many([(generate("JOB"), b"") for _ in range(JOBS)])
    consumer = Consumer(queue, handler, options=OPTS)
    task = asyncio.create_task(consumer.run())
    await _until(lambda: len(started) == 2 and consumer.in_flight == 4)  # 2 run, 2 queued
    assert consumer._threads is not None
    threads = list(consumer._threads._threads)
    await _cancel(task)
    go.set()  # the two running handlers return; their outcomes are discarded
    # The threads end once their queue is empty: the two leases queued for them used to
    # run there first, after run() had ended (and run again elsewhere once reaped).
    await _until(lambda: not any(t.is_alive() for t in threads))
    assert len(started) == 2
    await _reaped(queue, 4)
    assert list(assert_consistent(raw, queue.name).values()) == ["pending"] * JOBS


async def test_a_supervisor_cancelled_while_it_restarts_its_children_ends_cancelled() -> None:
    starts = {"first": 0, "second": 0}
    die, winding, wound = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def first() -> None:
        starts["first"] += 1
        if starts["first"] == 1:
            await die.wait()
            raise RuntimeError("the first child dies")
        await asyncio.Event().wait()

    async def second() -> None:
        starts["second"] += 1
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            winding.set()
            await wound.wait()  # a child that takes a while to stop (a consumer handing back)
            raise

    sup = Supervisor([ChildSpec("first", first), ChildSpec("second", second)],
                     strategy="rest_for_one", name="sup")
    task = asyncio.create_task(sup.run())
    try:
        await _until(lambda: starts == {"first": 1, "second": 1})
        die.set()  # rest_for_one: the second is stopped, then both start again
        await asyncio.wait_for(winding.wait(), 10)
        task.cancel()  # while the supervisor waits for the second child to be down
        wound.set()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)  # it used to swallow it and restart both
        assert starts == {"first": 1, "second": 1}
        assert sup.restart_count == 1
    finally:
        if not task.done():
            sup.stop()
            task.cancel()
            await asyncio.wait({task}, timeout=10)


async def test_a_pool_attempt_cancelled_while_its_timed_out_child_is_killed_is_handed_back(
        queue: AsyncQueue, tmp_path: Path) -> None:
    job = generate("JOB")
    await queue.enqueue(job, json.dumps({"dir": str(tmp_path)}).encode())
    consumer = Consumer(queue, T + "forever_noting_term", options=ConsumerOptions(
        pool="process", beat_ms=50, lease_ms=60_000, concurrency=1, timeout_ms=500,
        kill_grace_s=2.0, grace_s=0.1))
    task = asyncio.create_task(consumer.run())
    # Past its timeout the child got SIGTERM (which it ignores): the kill is under way, and
    # SIGKILL follows at the end of kill_grace_s. The stop cancels the attempt meanwhile.
    await _until(lambda: (tmp_path / "term").exists(), within=20)
    consumer.stop(hurry=True)
    await asyncio.wait_for(task, 20)
    [(child, _, _)] = _runs(tmp_path)
    assert not _alive(int(child))  # killed and reaped before the attempt ended
    # The cancellation went on after the kill: the job handed back, pending, no failure
    # written (it used to be swallowed: HandlerTimeout raised, the task wrote a retry).
    assert (consumer.stats.handed_back, consumer.stats.retried, consumer.stats.dead) == (1, 0, 0)
    assert await _state(queue, job) == "pending"


def _slow_to_stop(started: asyncio.Event, winding: asyncio.Event) -> Callable[[Lease], object]:
    """An ``async def`` handler that, cancelled, winds down until cancelled once more."""
    async def handler(lease: Lease) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            winding.set()
            await asyncio.Event().wait()  # the second cancel ends it
    return handler


def _left_running(prefix: str) -> list[str]:
    return sorted(t.get_name() for t in asyncio.all_tasks() if t.get_name().startswith(prefix))


async def _cancel_twice(task: asyncio.Task[object], winding: asyncio.Event) -> None:
    """Cancel ``task``; once its stop is under way (a handler winds down), cancel it again."""
    task.cancel()
    await asyncio.wait_for(winding.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 10)


async def test_a_sharded_consumer_cancelled_again_while_it_stops_leaves_no_loop_behind(
        conn: Any, qname: str) -> None:
    from echomq import AsyncShardedQueue, ShardedConsumer

    q = AsyncShardedQueue(conn, qname, shards=2)
    await q.admit_many([(generate("JOB"), b"", "lane")])
    started, winding = asyncio.Event(), asyncio.Event()
    consumer = ShardedConsumer(q, _slow_to_stop(started, winding), name="sharded-twice",
                               options=ConsumerOptions(beat_ms=20, lease_ms=2000, grace_s=30))
    task: asyncio.Task[object] = asyncio.create_task(consumer.run())
    await asyncio.wait_for(started.wait(), 10)
    await _cancel_twice(task, winding)
    # its layout watcher polled the queue's record every beat, for ever, once the second
    # cancel had cut its stop short
    assert _left_running("sharded-twice") == []


async def test_a_worker_cancelled_again_while_it_stops_leaves_no_loop_behind(
        conn: Any, qname: str) -> None:
    from echomq.ops.worker import Worker, WorkerSettings

    await AsyncQueue(conn, qname).enqueue(generate("JOB"), b"")
    started, winding = asyncio.Event(), asyncio.Event()
    settings = WorkerSettings(handlers={qname: _slow_to_stop(started, winding)}, beat_ms=20,
                              lease_ms=2000, grace_s=30, registry_beat_s=0.05)
    worker = Worker(settings, connector=conn, name="worker-twice")
    task: asyncio.Task[object] = asyncio.create_task(worker.run())
    await asyncio.wait_for(started.wait(), 10)
    await _cancel_twice(task, winding)
    # its registration kept beating (the worker listed as alive) once the second cancel had
    # cut its stop short
    assert _left_running("worker-twice") == []
