"""Hooks around the handler: before, after, on_failure, finished; sync and async hooks; a
failing hook changes nothing; the worker's metrics and traces are hooks too."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis

from echomq import AsyncQueue, Hooks, InvalidArgument, Lease, QueueOptions, generate
from echomq.core.outcomes import Ack, Backoff, BackoffPolicy, Outcome
from echomq.runtime.consumer import Consumer, ConsumerOptions
from tests.echomq._async.support import wait_for
from tests.echomq.invariants import assert_consistent

FAST = ConsumerOptions(beat_ms=20, lease_ms=2000, concurrency=8, grace_s=2.0,
                       backoff=BackoffPolicy(base_ms=10, max_ms=50))

@contextlib.asynccontextmanager
async def running(consumer: Consumer) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(consumer.run())
    try:
        yield task
    finally:
        consumer.stop()
        await asyncio.wait_for(task, 10)



class Recorder:
    """Every hook call, in order, as (point, job id, detail)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []

    def hooks(self) -> Hooks:
        async def before(lease: Lease) -> None:  # an async hook is awaited
            self.calls.append(("before", lease.id, lease.attempt))

        def after(lease: Lease, outcome: Outcome, seconds: float) -> None:
            assert seconds >= 0
            self.calls.append(("after", lease.id, type(outcome).__name__))

        def failed(lease: Lease, error: BaseException, seconds: float) -> None:
            self.calls.append(("on_failure", lease.id, str(error)))

        async def finished(lease: Lease, outcome: Outcome, began: float, ended: float) -> None:
            assert ended >= began
            self.calls.append(("finished", lease.id, type(outcome).__name__))

        return Hooks(before=[before], after=[after], on_failure=[failed], finished=[finished])

    def of(self, job: str) -> list[tuple[str, Any]]:
        return [(p, d) for p, j, d in self.calls if j == job]


async def test_hooks_run_around_each_outcome_in_order(queue: AsyncQueue, raw: redis.Redis) -> None:
    q = AsyncQueue(queue.connector, queue.name, options=QueueOptions(max_attempts=1))
    ok, boom, backoff = generate("JOB"), generate("JOB"), generate("JOB")
    await q.enqueue_many([(ok, b"ok"), (boom, b"boom"), (backoff, b"backoff")])

    async def handler(lease: Lease) -> Outcome:
        if lease.payload == b"boom":
            raise ValueError("no good")
        if lease.payload == b"backoff":
            return Backoff(error="later")
        return Ack(result=b"r")

    rec = Recorder()
    consumer = Consumer(q, handler, options=FAST, hooks=rec.hooks())
    async with running(consumer):
        async def all_finished() -> bool:
            return sum(p == "finished" for p, _, _ in rec.calls) == 3
        await wait_for(all_finished, within=30)
    assert rec.of(ok) == [("before", 1), ("after", "Ack"), ("finished", "Ack")]
    assert rec.of(boom) == [("before", 1), ("on_failure", "no good"), ("after", "Backoff"),
                            ("finished", "Backoff")]
    # a Backoff the handler returns is its answer, not an exception: no on_failure
    assert rec.of(backoff) == [("before", 1), ("after", "Backoff"), ("finished", "Backoff")]
    assert_consistent(raw, q.name)


async def test_a_failing_hook_is_logged_and_changes_nothing(queue: AsyncQueue,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    job = generate("JOB")
    await queue.enqueue(job, b"")
    ran: list[str] = []

    def broken(lease: Lease, *rest: Any) -> None:
        raise RuntimeError("hook bug")

    async def handler(lease: Lease) -> None:
        ran.append(lease.id)

    hooks = Hooks(before=[broken], after=[broken], finished=[broken],
                  on_failure=[broken]).then(Hooks(after=[lambda lease, o, s: ran.append("after")]))
    consumer = Consumer(queue, handler, options=FAST, hooks=hooks)
    with caplog.at_level(logging.ERROR, logger="echomq.core.hooks"):
        async with running(consumer):
            async def done() -> bool:
                row = await queue.job(job)
                return row is not None and row["state"] == b"done"
            await wait_for(done, within=30)
    assert ran == [job, "after"]  # the handler ran, and so did the hook after the broken one
    assert consumer.stats.completed == 1
    assert sum("hook" in r.getMessage() and "failed" in r.getMessage() for r in caplog.records) == 3


@pytest.mark.parametrize("kw", [{"before": [1]}, {"after": "name"}, {"on_failure": 3},
                                {"finished": [None]}])
def test_bad_hooks_are_refused(kw: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgument):
        Hooks(**kw)


def test_a_bare_callable_is_one_hook_and_then_joins_in_order() -> None:
    def a(lease: Lease) -> None: ...
    def b(lease: Lease) -> None: ...
    joined = Hooks(before=a).then(Hooks(before=[b]))  # type: ignore[arg-type]
    assert joined.before == (a, b) and not Hooks() and joined
    assert Hooks().then(None) == Hooks()


def test_consumer_refuses_hooks_of_another_type(queue: AsyncQueue) -> None:
    async def handler(lease: Lease) -> None: ...
    with pytest.raises(InvalidArgument):
        Consumer(queue, handler, hooks={"before": []})  # type: ignore[arg-type]


async def test_worker_runs_its_own_hooks_then_the_settings_hooks(conn: Any, qname: str) -> None:
    from echomq.ops.worker import Worker, WorkerSettings

    q = AsyncQueue(conn, qname)
    jobs = [generate("JOB") for _ in range(3)]
    await q.enqueue_many([(j, b"") for j in jobs])
    rec = Recorder()

    async def handler(lease: Lease) -> None: ...

    settings = WorkerSettings(handlers={qname: handler}, beat_ms=20, lease_ms=5000, hooks=rec.hooks())
    worker = Worker(settings, connector=conn, name="hooked")
    task = asyncio.create_task(worker.run())
    try:
        async def finished() -> bool:
            return sum(p == "finished" for p, _, _ in rec.calls) == 3
        await wait_for(finished, within=30)
    finally:
        worker.stop()
        await task
    assert worker.minute.totals().get("processed") == 3  # the worker's own after hook counted
    assert {j for _, j, _ in rec.calls} == set(jobs)
