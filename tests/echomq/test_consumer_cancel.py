"""The consumer and cancellation, results and progress (issue 14 items 5-7), both topologies.

* An ``async def`` handler of a job asked to stop is cancelled at the next heartbeat and
  the job ends ``cancelled`` (``stats.cancelled``), never done.
* A blocking handler sees ``lease.cancel`` set at the next heartbeat; whatever it returns,
  the job ends ``cancelled``.
* A handler's bytes or JSON return value is the job's result; ``result()`` waits for it;
  a progress report made by the handler is readable while it runs and after.
"""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
import redis

from echomq import AsyncQueue, CancelOutcome, JobCancelled, Lease, ProgressOutcome, generate
from echomq.consumer import Consumer, ConsumerOptions
from tests.echomq._async.support import wait_for
from tests.echomq.invariants import assert_consistent
from tests.echomq.test_consumer import running

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
