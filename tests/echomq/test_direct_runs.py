"""Direct runs (docs/decisions/0025-direct-runs.md): a blocking handler without hooks runs
its attempts straight on the handler threads, without a task per job. Each keeps the task
path's guarantees: at most ``concurrency`` handlers at once, heartbeats while they run, a
lost lease's outcome discarded, a failure written with its error, and a stop that finishes
what runs and hands back the rest at once (leased ahead, or still running at the end of
the grace period)."""

from __future__ import annotations

import asyncio
import threading
import time

import redis

from echomq import AsyncQueue, Lease, generate
from echomq.core.outcomes import BackoffPolicy
from echomq.runtime.consumer import Consumer, ConsumerOptions
from tests.echomq._async.support import wait_for
from tests.echomq.invariants import assert_consistent


def jid() -> str:
    return generate("JOB")


async def _stats(queue: AsyncQueue, **want: int) -> bool:
    s = await queue.stats()
    return all(getattr(s, k) == v for k, v in want.items())


async def test_blocking_handlers_lease_ahead_but_never_run_more_than_concurrency(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    await queue.enqueue_many([(jid(), b"") for _ in range(300)])
    lock = threading.Lock()
    running, most = 0, 0

    def handler(lease: Lease) -> None:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.002)  # long enough for the threads to overlap
        with lock:
            running -= 1

    consumer = Consumer(queue, handler, options=ConsumerOptions(concurrency=4, beat_ms=20,
                                                                 lease_ms=5000))
    task = asyncio.create_task(consumer.run())
    held = 0
    try:
        while (await queue.stats()).done < 300:
            held = max(held, consumer.in_flight)
            await asyncio.sleep(0.001)
    finally:
        consumer.stop()
        await asyncio.wait_for(task, 10)
    assert consumer.stats.completed == 300 and consumer.stats.stale == 0
    assert most == 4  # the threads bound the running handlers
    assert 4 < held <= 8  # leases held ahead of them, at most concurrency more
    assert set(assert_consistent(raw, queue.name).values()) == {"done"}


async def test_a_stop_finishes_running_handlers_and_hands_back_the_leases_ahead(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    ids = [jid() for _ in range(60)]
    await queue.enqueue_many([(i, b"") for i in ids])
    release, started = threading.Event(), threading.Semaphore(0)
    ran: list[str] = []

    def handler(lease: Lease) -> None:
        ran.append(lease.id)
        started.release()
        release.wait(10)

    consumer = Consumer(queue, handler, options=ConsumerOptions(concurrency=2, beat_ms=20,
                                                                 lease_ms=30_000, grace_s=10))
    task = asyncio.create_task(consumer.run())
    await wait_for(lambda: _true(consumer.in_flight == 4))  # 2 running, 2 leased ahead
    assert started.acquire(timeout=5) and started.acquire(timeout=5)
    consumer.stop()
    await wait_for(lambda: _stats(queue, active=2))  # the two ahead: back at once
    assert not task.done() and len(ran) == 2  # the running two: within the grace period
    release.set()
    await asyncio.wait_for(task, 10)
    s = consumer.stats
    assert (s.completed, s.handed_back, s.stale, len(ran)) == (2, 2, 0, 2)
    where = assert_consistent(raw, queue.name)
    assert sorted(i for i, st in where.items() if st == "done") == sorted(ran)
    for job in set(ids) - set(ran):  # never run: pending, no failure counted
        row = await queue.job(job)
        assert row is not None and row["state"] == b"pending" and "failures" not in row


async def test_a_handler_still_running_after_the_grace_period_is_given_up_and_handed_back(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    release = threading.Event()
    job = jid()
    await queue.enqueue(job, b"")

    def stuck(lease: Lease) -> None:
        release.wait(10)

    consumer = Consumer(queue, stuck, options=ConsumerOptions(beat_ms=20, lease_ms=60_000,
                                                              grace_s=0.2))
    task = asyncio.create_task(consumer.run())
    try:
        await wait_for(lambda: _stats(queue, active=1))
        consumer.stop()
        await asyncio.wait_for(task, 5)
    finally:
        release.set()  # the thread returns now: its outcome is discarded
    assert consumer.stats.handed_back == 1 and consumer.stats.completed == 0
    await asyncio.sleep(0.05)
    assert assert_consistent(raw, queue.name) == {job: "pending"}
    row = await queue.job(job)
    assert row is not None and row["attempts"] == b"1" and "failures" not in row


async def test_a_lost_lease_discards_the_blocking_handlers_outcome(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    release, started = threading.Event(), threading.Event()
    job = jid()
    await queue.enqueue(job, b"")

    def slow(lease: Lease) -> None:
        started.set()
        release.wait(10)

    consumer = Consumer(queue, slow, options=ConsumerOptions(beat_ms=20, lease_ms=2000,
                                                             maintenance=False))
    task = asyncio.create_task(consumer.run())
    try:
        assert await asyncio.to_thread(started.wait, 5)
        # Another party takes the job: its lease moves on (as after an expiry + re-claim).
        raw.zadd(f"emq:{{{queue.name}}}:active", {job: 0})
        assert await queue.reap() == (1, 0)
        await wait_for(lambda: _true(consumer.stats.lost == 1))
        # The job is pending again and this consumer leases it anew (attempt 2), in a
        # second thread: the first one still blocks, its outcome to be discarded.
        await wait_for(lambda: _true(consumer.stats.claimed == 2))
        release.set()
        await wait_for(lambda: _stats(queue, done=1))
    finally:
        release.set()
        consumer.stop()
        await asyncio.wait_for(task, 10)
    # Attempt 1's answer was never sent (it would have been refused: stale), attempt 2's was.
    s = consumer.stats
    assert (s.lost, s.completed, s.stale) == (1, 1, 0)
    row = await queue.job(job)
    assert row is not None and row["attempts"] == b"2"
    assert assert_consistent(raw, queue.name) == {job: "done"}


async def test_a_failing_blocking_handler_is_retried_with_its_error(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    job = jid()
    await queue.enqueue(job, b"")
    seen: list[int] = []

    def flaky(lease: Lease) -> object:
        seen.append(lease.attempt)
        if lease.attempt == 1:
            raise ValueError("first try")
        if lease.attempt == 2:
            return object()  # no outcome: a TypeError, logged, the attempt fails
        return {"ok": True}

    consumer = Consumer(queue, flaky, options=ConsumerOptions(
        beat_ms=20, lease_ms=2000, backoff=BackoffPolicy(base_ms=10, max_ms=20)))
    task = asyncio.create_task(consumer.run())
    try:
        await wait_for(lambda: _stats(queue, done=1))
    finally:
        consumer.stop()
        await asyncio.wait_for(task, 10)
    assert seen == [1, 2, 3] and consumer.stats.retried == 2 and consumer.stats.completed == 1
    assert await queue.result(job) == b'{"ok":true}'
    assert assert_consistent(raw, queue.name) == {job: "done"}


async def _true(value: bool) -> bool:
    return value
