"""Handler timeouts: a handler past its timeout fails its attempt with HandlerTimeout and
the lease is given back at once (never left to expire), on both topologies."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis

from echomq import (
    AsyncQueue,
    HandlerTimeout,
    InvalidArgument,
    Lease,
    Queue,
    QueueOptions,
    ShardedQueue,
    Verdict,
    generate,
)
from echomq.core.failures import parse_failure
from echomq.core.hooks import Hooks
from echomq.core.outcomes import BackoffPolicy
from echomq.protocol import calls as script_calls
from echomq.runtime.consumer import Consumer, ConsumerOptions
from echomq.runtime.handling import timeout_for
from tests.conftest import keys_of
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
    from echomq.ops.worker import WorkerSettings
    from tests.echomq import worker_targets

    settings = WorkerSettings(handlers={"q": worker_targets.ok}, timeout_ms=5000)
    assert settings.consumer_options().timeout_ms == 5000
    with pytest.raises(InvalidArgument):
        WorkerSettings(handlers={"q": worker_targets.ok}, timeout_ms=0)


# ------------------------------------------------------------- a job's own timeout
async def test_a_jobs_own_timeout_is_kept_in_its_row_and_returned_by_claim(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    own, plain = generate("JOB"), generate("JOB")
    assert await queue.admit(own, b"", timeout_ms=750) is Verdict.ENQUEUED
    await queue.enqueue(plain, b"")
    assert raw.hget(queue.job_key(own), "timeout") == b"750"
    assert raw.hget(queue.job_key(plain), "timeout") is None  # no field when not given
    leases = {x.id: x for x in await queue.claim(2, lease_ms=60_000)}
    assert leases[own].timeout_ms == 750 and leases[plain].timeout_ms is None
    assert timeout_for(leases[own], 5) == 750 and timeout_for(leases[plain], 5) == 5
    # it stays with the job: a retry and the next claim return it again
    await queue.retry(leases[own], delay_ms=0, error="again")
    (again,) = await queue.claim(1, lease_ms=60_000)
    assert (again.id, again.attempt, again.timeout_ms) == (own, 2, 750)
    assert_consistent(raw, queue.name)


async def test_a_jobs_own_timeout_is_preferred_to_the_consumers(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    """A job's timeout shorter than the consumer's times it out; a longer one lets it run
    past the consumer's; a job without one gets the consumer's."""
    q = _queue(queue, 1)
    short, long_, plain = generate("JOB"), generate("JOB"), generate("JOB")
    await q.admit(short, b"sleep", timeout_ms=100)
    await q.admit(long_, b"sleep", timeout_ms=60_000)
    await q.admit(plain, b"sleep")
    failures: dict[str, BaseException] = {}

    async def sleeps(lease: Lease) -> None:
        await asyncio.sleep(1.0)  # past 100 ms and past the consumer's 400 ms; within 60 s

    hooks = Hooks(on_failure=[lambda lease, error, s: failures.__setitem__(lease.id, error)])
    consumer = Consumer(q, sleeps, options=dataclasses.replace(OPTS, timeout_ms=400), hooks=hooks)
    async with running(consumer):
        async def settled() -> bool:
            return [await _state(q, j) for j in (short, long_, plain)] == ["dead", "done", "dead"]
        await wait_for(settled, within=30)
    short_err = parse_failure((await q.job(short) or {})["error"])
    assert short_err.type == "HandlerTimeout"
    assert "past its timeout of 100 ms (the job's, set at admission" in short_err.message
    plain_err = parse_failure((await q.job(plain) or {})["error"])
    assert "past its timeout of 400 ms (the consumer's" in plain_err.message
    assert sorted(failures) == sorted([short, plain])
    assert consumer.stats.completed == 1 and consumer.stats.dead == 2 and consumer.stats.lost == 0
    assert_consistent(raw, q.name)


async def test_a_jobs_own_timeout_gives_the_lease_back_at_once(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    """No consumer timeout at all: the job's own 200 ms fails the attempt and the fenced
    retry hands the lease (600 s) back now; a thread's late answer is discarded."""
    q = _queue(queue, 2)
    job = generate("JOB")
    await q.admit(job, b"", timeout_ms=200)
    calls: list[int] = []
    release = threading.Event()

    def blocking(lease: Lease) -> None:
        calls.append(lease.attempt)
        release.wait(60)

    consumer = Consumer(q, blocking, options=dataclasses.replace(OPTS, timeout_ms=None))
    async with running(consumer):
        async def dead() -> bool:
            return await _state(q, job) == "dead"
        await wait_for(dead, within=30)
        release.set()
    assert calls == [1, 2] and consumer.stats.retried == 1 and consumer.stats.dead == 1
    assert raw.zscore(q.keys["active"], job) is None
    assert parse_failure((await q.job(job) or {})["error"]).type == "HandlerTimeout"
    assert_consistent(raw, q.name)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "100", 31_622_400_001])
async def test_a_bad_job_timeout_is_refused_before_any_write(
        queue: AsyncQueue, raw: redis.Redis, bad: object) -> None:
    job = generate("JOB")
    with pytest.raises(InvalidArgument, match="timeout_ms"):
        await queue.admit(job, b"", timeout_ms=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="timeout_ms"):
        await queue.admit_many([(job, b"")], timeout_ms=bad)  # type: ignore[arg-type]
    assert not keys_of(raw, queue.name)


@pytest.mark.parametrize("bad", ["0", "-5", "1.5", "x", "31622400001"])
async def test_the_admit_script_refuses_a_bad_timeout_and_writes_nothing(
        queue: AsyncQueue, raw: redis.Redis, bad: str) -> None:
    """The script checks it too (EMQARG), before the version fence's first write."""
    job = generate("JOB")
    call = script_calls.admit(queue.k, job, b"", lane="", delay_ms=0, serial=False, max_attempts=None)
    args = list(call.args)
    args[7] = bad
    with pytest.raises(InvalidArgument, match="timeout_ms must be an integer"):
        await queue.connector.run(script_calls.Call(call.script, call.keys, args))
    assert not keys_of(raw, queue.name)


def test_the_blocking_api_and_a_sharded_queue_take_a_job_timeout(
        sync_conn: Any, qname: str, raw: redis.Redis) -> None:
    q = Queue(sync_conn, qname)
    job = generate("JOB")
    assert q.admit(job, b"", timeout_ms=1234) is Verdict.ENQUEUED
    (lease,) = q.claim(1, lease_ms=60_000)
    assert lease.timeout_ms == 1234
    many = [generate("JOB") for _ in range(3)]
    assert q.admit_many([(j, b"") for j in many], timeout_ms=99) == [Verdict.ENQUEUED] * 3
    assert {x.timeout_ms for x in q.claim(3, lease_ms=60_000)} == {99}
    sq = ShardedQueue(sync_conn, qname + "s", shards=2)
    sj = generate("JOB")
    assert sq.admit(sj, b"", timeout_ms=4321) is Verdict.ENQUEUED
    (slease,) = sq.claim(1, lease_ms=60_000)
    assert (slease.id, slease.timeout_ms) == (sj, 4321)
