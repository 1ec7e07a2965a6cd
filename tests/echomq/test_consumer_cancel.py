"""The consumer and cancellation, results and progress (issue 14 items 5-7), both topologies.

* An ``async def`` handler of a job asked to stop is cancelled at the next heartbeat and
  the job ends ``cancelled`` (``stats.cancelled``), never done.
* A blocking handler sees ``lease.cancel`` set at the next heartbeat; whatever it returns,
  the job ends ``cancelled``.
* A handler's bytes or JSON return value is the job's result; ``result()`` waits for it;
  a progress report made by the handler is readable while it runs and after.
* A job leased by the hand-off path (docs/decisions/0018-hand-off.md: a parked consumer is
  leased the job inside the admission, with no claim) is cancelled like any other lease:
  its beat says so, it ends ``cancelled``, never also completed.
* A consumer's run() (plain or sharded) cancelled while a library call of its start-up drops
  the cancel (Python 3.11's ``wait_for``, which redis-py wraps writes in, does when the cancel
  races the write's completion) still ends cancelled: it used to go on listening for ever.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest
import redis

from echomq import (
    AsyncQueue,
    AsyncShardedQueue,
    CancelOutcome,
    Completion,
    JobCancelled,
    Lease,
    ProgressOutcome,
    RetryOutcome,
    ShardedConsumer,
    Verdict,
    generate,
)
from echomq.runtime.consumer import Consumer, ConsumerOptions
from tests.echomq._async.support import wait_for
from tests.echomq.invariants import assert_consistent
from tests.echomq.test_consumer import running
from tests.echomq.test_handoff import handoff_message

FAST = ConsumerOptions(beat_ms=20, lease_ms=2000, concurrency=4, grace_s=2.0)


async def test_an_async_handler_asked_to_stop_is_cancelled_and_the_job_ends_cancelled(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    started, stopped = asyncio.Event(), asyncio.Event()

    async def handler(lease: Lease) -> bytes:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            stopped.set()
            raise
        return b"never"

    consumer = Consumer(queue, handler, options=FAST)
    job = generate("JOB")
    async with running(consumer):
        await queue.enqueue(job, b"p")
        await asyncio.wait_for(started.wait(), 30)
        assert await queue.cancel([job]) == [CancelOutcome.ASKED]
        await asyncio.wait_for(stopped.wait(), 30)  # at its next heartbeat
        with pytest.raises(JobCancelled):
            await queue.result(job, timeout=30)
    assert consumer.stats.cancelled == 1 and consumer.stats.completed == 0
    assert assert_consistent(raw, queue.name) == {job: "done"}
    assert (await queue.job(job) or {})["state"] == b"cancelled"


async def test_a_blocking_handler_sees_the_token_and_its_return_is_discarded(
        queue: AsyncQueue) -> None:
    seen = threading.Event()

    def handler(lease: Lease) -> bytes:
        assert lease.cancel.wait(30), "the token was never set"
        seen.set()
        return b"finished anyway"

    consumer = Consumer(queue, handler, options=FAST)
    job = generate("JOB")
    async with running(consumer):
        await queue.enqueue(job, b"p")
        await wait_for(lambda: _active(queue), 30)
        assert await queue.cancel([job]) == [CancelOutcome.ASKED]
        with pytest.raises(JobCancelled):
            await queue.result(job, timeout=30)
    assert seen.is_set() and consumer.stats.cancelled == 1 and consumer.stats.completed == 0


async def _active(q: AsyncQueue) -> bool:
    return (await q.stats()).active == 1


async def test_a_handlers_json_or_bytes_is_the_result_and_progress_is_readable(
        queue: AsyncQueue) -> None:
    gate = asyncio.Event()

    async def handler(lease: Lease) -> object:
        assert await queue.report_progress(lease, b"half") is ProgressOutcome.RECORDED
        await gate.wait()
        return {"id": lease.id, "ok": True} if lease.payload == b"json" else b"\x00raw"

    consumer = Consumer(queue, handler, options=FAST)
    a, b = generate("JOB"), generate("JOB")
    async with running(consumer):
        await queue.enqueue(a, b"json")
        await queue.enqueue(b, b"bytes")
        waiters = [asyncio.create_task(queue.result(j, timeout=30)) for j in (a, b)]
        await wait_for(lambda: _reported(queue, a, b), 30)
        gate.set()
        got_a, got_b = await asyncio.wait_for(asyncio.gather(*waiters), 60)
    assert json.loads(got_a) == {"id": a, "ok": True} and got_b == b"\x00raw"
    assert await queue.progress(a) == b"half"  # kept with the done row
    assert consumer.stats.completed == 2


async def _reported(q: AsyncQueue, *ids: str) -> bool:
    return all([await q.progress(i) == b"half" for i in ids])


async def test_a_handed_off_lease_asked_to_stop_ends_cancelled_never_completed(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    # The lease comes from the hand-off message alone (no claim ran): the ask reaches it
    # through its beat and its progress report, and its complete ends the job cancelled.
    sub = await queue.connector.wake_subscription(queue.keys["wake"])
    try:
        assert await queue.park("t1", lease_ms=30_000, ttl_ms=30_000)
        job = generate("JOB")
        assert await queue.enqueue(job, b"p") is Verdict.ENQUEUED
        lease = await handoff_message(sub, queue, "t1")
    finally:
        await sub.aclose()
    assert (lease.id, lease.attempt) == (job, 1)
    assert (await queue.job(job) or {})["state"] == b"active"  # leased inside the admission
    assert await queue.cancel([job]) == [CancelOutcome.ASKED]
    beat = await queue.heartbeat(lease, lease_ms=30_000)
    assert beat is not None and beat.cancel  # the beat tells the handed-off attempt
    assert await queue.report_progress(lease, b"late") is ProgressOutcome.STOP
    assert await queue.complete(lease, b"done anyway") is Completion.CANCELLED
    assert await queue.complete(lease, b"again") is Completion.STALE  # ended once
    assert await queue.retry(lease, delay_ms=0, error="x") is RetryOutcome.STALE
    row = await queue.job(job) or {}
    assert row["state"] == b"cancelled" and "result" not in row and "payload" not in row
    assert assert_consistent(raw, queue.name) == {job: "done"}  # kept in the done set
    with pytest.raises(JobCancelled):
        await queue.result(job, timeout=0)


@pytest.mark.parametrize("kind", ["async", "blocking"])
async def test_a_parked_consumer_cancels_a_handed_off_job_and_never_completes_it(
        queue: AsyncQueue, raw: redis.Redis, kind: str) -> None:
    # A consumer parks; the admission hands it the job (no claim); the job is cancelled
    # while its handler runs: an async handler is cancelled, a blocking one sees the token
    # and returns anyway; either way the job ends cancelled, never done, run once.
    runs: list[tuple[str, int]] = []
    started, stopped = threading.Event(), threading.Event()

    async def async_handler(lease: Lease) -> bytes:
        runs.append((lease.id, lease.attempt))
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            stopped.set()
            raise
        return b"never"

    def blocking_handler(lease: Lease) -> bytes:
        runs.append((lease.id, lease.attempt))
        started.set()
        assert lease.cancel.wait(30), "the token was never set"
        stopped.set()
        return b"finished anyway"

    handler = async_handler if kind == "async" else blocking_handler
    consumer = Consumer(queue, handler,
                        options=ConsumerOptions(beat_ms=200, lease_ms=20_000, concurrency=2))
    job = generate("JOB")
    async with running(consumer):
        await wait_for(lambda: _truth(bool(raw.exists(queue.keys["parked"]))), 30)
        assert await queue.enqueue(job, b"p") is Verdict.ENQUEUED
        await wait_for(lambda: _truth(started.is_set()), 30)
        assert consumer.stats.handed_off == 1  # leased by the admission, not by a claim
        assert await queue.cancel([job]) == [CancelOutcome.ASKED]
        with pytest.raises(JobCancelled):
            await queue.result(job, timeout=30)
        await wait_for(lambda: _truth(consumer.stats.cancelled == 1), 30)
    assert stopped.is_set() and runs == [(job, 1)]
    assert consumer.stats.claimed == 1 and consumer.stats.completed == 0
    assert consumer.stats.stale == 0
    row = await queue.job(job) or {}
    assert row["state"] == b"cancelled" and "result" not in row
    assert assert_consistent(raw, queue.name) == {job: "done"}


async def _truth(value: bool) -> bool:
    return value


@pytest.mark.parametrize("sharded", [False, True], ids=["plain", "sharded"])
async def test_a_run_whose_cancel_a_library_call_dropped_still_ends_cancelled(
        conn: Any, qname: str, sharded: bool) -> None:
    queue: Any = AsyncShardedQueue(conn, qname, shards=2) if sharded else AsyncQueue(conn, qname)
    consumer: Any = (ShardedConsumer if sharded else Consumer)(
        queue, lambda lease: None, options=ConsumerOptions(beat_ms=3_600_000, lease_ms=10_800_000))
    first = queue.open if sharded else consumer._parking.prepare
    dropped = asyncio.Event()

    async def dropping_a_cancel() -> Any:
        """A start-up call whose library swallowed the cancel that reached it (as 3.11's
        wait_for does when the cancel races the inner call's completion)."""
        asyncio.current_task().cancel()  # type: ignore[union-attr]
        try:
            await asyncio.sleep(0)
        except asyncio.CancelledError:
            dropped.set()
        return await first()

    if sharded:
        queue.open = dropping_a_cancel
    else:
        consumer._parking.prepare = dropping_a_cancel
    run = asyncio.create_task(consumer.run())
    done, _ = await asyncio.wait([run], timeout=30)
    assert dropped.is_set()
    if not done:  # the bug: it runs (and listens) on; stop it so the test itself ends
        consumer.stop(hurry=True)
        await asyncio.wait([run], timeout=30)
    assert done and run.cancelled()
