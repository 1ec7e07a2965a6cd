"""Handler timeouts: a handler past its timeout fails its attempt with HandlerTimeout and
the lease is given back at once (never left to expire), on both topologies."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
from collections.abc import AsyncIterator

import pytest
import redis

from echomq import AsyncQueue, HandlerTimeout, InvalidArgument, Lease, QueueOptions, generate
from echomq.consumer import Consumer, ConsumerOptions
from echomq.failures import parse_failure
from echomq.hooks import Hooks
from echomq.outcomes import BackoffPolicy
from tests.echomq._async.support import wait_for
from tests.echomq.invariants import assert_consistent

# A lease far longer than the waits below: a job that leaves ``active`` within them was
# handed back by the timeout, not by the lease's expiry and reap.
OPTS = ConsumerOptions(beat_ms=20, lease_ms=600_000, concurrency=4, grace_s=2.0, timeout_ms=200,
                       backoff=BackoffPolicy(base_ms=10, max_ms=50))

@contextlib.asynccontextmanager
async def running(consumer: Consumer) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(consumer.run())
    try:
        yield task
    finally:
        consumer.stop()
        await asyncio.wait_for(task, 10)



def _queue(queue: AsyncQueue, attempts: int) -> AsyncQueue:
    return AsyncQueue(queue.connector, queue.name, options=QueueOptions(max_attempts=attempts))


async def _state(q: AsyncQueue, job: str) -> str:
    row = await q.job(job)
    return row["state"].decode() if row else ""


async def test_an_async_handler_past_its_timeout_fails_and_gives_the_lease_back(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    q = _queue(queue, 2)
    job = generate("JOB")
    await q.enqueue(job, b"")
    calls: list[int] = []
    failures: list[BaseException] = []

    async def stuck(lease: Lease) -> None:
        calls.append(lease.attempt)
        await asyncio.Event().wait()  # never returns by itself

    hooks = Hooks(on_failure=[lambda lease, error, s: failures.append(error)])
    consumer = Consumer(q, stuck, options=OPTS, hooks=hooks)
    async with running(consumer):
        async def dead() -> bool:
            return await _state(q, job) == "dead"
        await wait_for(dead, within=30)
    assert calls == [1, 2]  # each attempt timed out, retried, then dead at the limit
    assert consumer.stats.retried == 1 and consumer.stats.dead == 1 and consumer.stats.lost == 0
    row = await q.job(job)
    assert row is not None and row["attempts"] == b"2"
    err = parse_failure(row["error"])
    assert err.type == "HandlerTimeout" and "past its timeout of 200 ms" in err.message
    assert [type(e) for e in failures] == [HandlerTimeout, HandlerTimeout]
    assert_consistent(raw, q.name)


async def test_a_blocking_handler_past_its_timeout_fails_and_its_late_answer_is_discarded(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    q = _queue(queue, 1)
    job = generate("JOB")
    await q.enqueue(job, b"")
    release = threading.Event()

    def blocking(lease: Lease) -> None:
        release.wait(60)  # a thread cannot be stopped: it returns when released

    consumer = Consumer(q, blocking, options=dataclasses.replace(OPTS, concurrency=1))
    async with running(consumer):
        async def dead() -> bool:
            return await _state(q, job) == "dead"
        await wait_for(dead, within=30)
        release.set()  # its late return must change nothing
        after = generate("JOB")  # the one thread runs this only once the stuck call returned
        await q.enqueue(after, b"")

        async def next_done() -> bool:
            return await _state(q, after) == "done"
        await wait_for(next_done, within=30)
    assert consumer.stats.completed == 1 and consumer.stats.dead == 1
    assert await _state(q, job) == "dead"
    assert parse_failure((await q.job(job) or {})["error"]).type == "HandlerTimeout"


async def test_a_handler_within_its_timeout_completes(queue: AsyncQueue) -> None:
    job = generate("JOB")
    await queue.enqueue(job, b"")

    async def quick(lease: Lease) -> None:
        await asyncio.sleep(0.01)

    consumer = Consumer(queue, quick, options=OPTS)
    async with running(consumer):
        async def done() -> bool:
            return await _state(queue, job) == "done"
        await wait_for(done, within=30)
    assert consumer.stats.completed == 1 and consumer.stats.retried == 0


async def test_the_handlers_own_timeout_error_is_an_ordinary_failure(queue: AsyncQueue) -> None:
    q = _queue(queue, 1)
    job = generate("JOB")
    await q.enqueue(job, b"")

    async def raises(lease: Lease) -> None:
        raise TimeoutError("the upstream API timed out")

    consumer = Consumer(q, raises, options=OPTS)
    async with running(consumer):
        async def dead() -> bool:
            return await _state(q, job) == "dead"
        await wait_for(dead, within=30)
    err = parse_failure((await q.job(job) or {})["error"])
    assert err.type == "TimeoutError" and err.message == "the upstream API timed out"


async def test_no_timeout_by_default(queue: AsyncQueue) -> None:
    assert ConsumerOptions().timeout_ms is None
    job = generate("JOB")
    await queue.enqueue(job, b"")
    opts = dataclasses.replace(OPTS, timeout_ms=None, lease_ms=2000)

    async def slowish(lease: Lease) -> None:
        await asyncio.sleep(0.4)  # longer than OPTS's timeout: no limit here

    consumer = Consumer(queue, slowish, options=opts)
    async with running(consumer):
        async def done() -> bool:
            return await _state(queue, job) == "done"
        await wait_for(done, within=30)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "100"])
def test_bad_timeouts_are_refused(bad: object) -> None:
    with pytest.raises(InvalidArgument):
        ConsumerOptions(timeout_ms=bad)  # type: ignore[arg-type]


def test_worker_settings_pass_the_timeout_and_refuse_a_bad_one() -> None:
    from echomq.worker import WorkerSettings
    from tests.echomq import worker_targets

    settings = WorkerSettings(handlers={"q": worker_targets.ok}, timeout_ms=5000)
    assert settings.consumer_options().timeout_ms == 5000
    with pytest.raises(InvalidArgument):
        WorkerSettings(handlers={"q": worker_targets.ok}, timeout_ms=0)
