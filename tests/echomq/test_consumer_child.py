"""ConsumerChild: a consumer a supervisor restarts as a new Consumer, with stats that add up."""

from __future__ import annotations

import asyncio

from echomq import (
    AsyncQueue,
    BackoffPolicy,
    ChildSpec,
    ConsumerChild,
    ConsumerOptions,
    ConsumerStats,
    Lease,
    Supervisor,
    generate,
)
from echomq.runtime.consumer_child import add_stats
from tests.echomq._async.support import wait_for

FAST = ConsumerOptions(beat_ms=20, lease_ms=2000, concurrency=4, grace_s=2.0,
                       backoff=BackoffPolicy(base_ms=10, max_ms=50))


def test_add_stats_adds_counters_and_refusals_code_by_code() -> None:
    total = ConsumerStats(completed=2, refusals={"OOM": 1})
    add_stats(total, ConsumerStats(completed=3, dead=1, refusals={"OOM": 2, "BUSY": 1}))
    assert (total.completed, total.dead, total.refusals) == (5, 1, {"OOM": 3, "BUSY": 1})


async def test_a_restarted_child_is_a_new_consumer_and_its_stats_add_up(queue: AsyncQueue) -> None:
    seen: list[str] = []

    async def handler(lease: Lease) -> None:
        seen.append(lease.id)

    child = ConsumerChild(queue, handler, FAST, name="child-test")
    sup = Supervisor([child.spec("consumer")], max_restarts=5, period_s=60)
    tree = asyncio.create_task(sup.run())
    try:
        first = [generate("JOB") for _ in range(5)]
        await queue.enqueue_many([(i, b"") for i in first])
        await wait_for(lambda: _done(queue, 5), within=30)
        await wait_for(lambda: _true(child.stats.completed == 5), within=30)  # counted after the reply
        before = child.current
        assert before is not None and before.stats.completed == 5
        # The consumer's task ends (cancelled from outside): the supervisor starts the child again.
        task = sup.task("consumer")
        assert task is not None
        task.cancel()
        await wait_for(lambda: _true(child.starts == 2 and child.current is not before), within=30)
        second = [generate("JOB") for _ in range(4)]
        await queue.enqueue_many([(i, b"") for i in second])
        await wait_for(lambda: _done(queue, 9), within=30)
        await wait_for(lambda: _true(child.stats.completed == 9), within=30)
        assert child.current is not None and child.current.stats.completed == 4
        assert child.stats.completed == 9  # the ended consumer's 5 and the running one's 4
        assert child.stats.claimed == 9
    finally:
        sup.stop()
        await asyncio.wait_for(tree, 30)
    assert sorted(seen) == sorted(first + second)


async def test_spec_stops_gracefully_within_the_consumers_grace(queue: AsyncQueue) -> None:
    async def handler(lease: Lease) -> None:
        return None

    child = ConsumerChild(queue, handler, FAST)
    spec = child.spec("c")
    assert isinstance(spec, ChildSpec)
    assert (spec.name, spec.restart, spec.shutdown_s) == ("c", "permanent", FAST.grace_s + 1)
    child.stop()  # before any start: nothing to stop, no error
    run = asyncio.create_task(child.run())
    await wait_for(lambda: _true(child.current is not None), within=30)
    child.stop()
    await asyncio.wait_for(run, 30)  # the stop ends run() by itself, no cancel
    assert child.starts == 1 and child.stats.completed == 0


async def _done(queue: AsyncQueue, n: int) -> bool:
    return (await queue.stats()).done == n


async def _true(value: bool) -> bool:
    return value
