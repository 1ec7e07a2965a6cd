"""Consumers: outcomes, lost leases, wake-up, shutdown; the supervisor."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time

import pytest
import redis

from echomq import AsyncConnector, AsyncQueue, Lease, QueueOptions, generate
from echomq.core.outcomes import Ack, Backoff, BackoffPolicy, Defer
from echomq.runtime.consumer import Consumer, ConsumerOptions
from echomq.runtime.supervisor import ChildSpec, Supervisor, SupervisorGaveUp
from tests.echomq._async.support import wait_for
from tests.echomq.invariants import assert_consistent

FAST = ConsumerOptions(beat_ms=20, lease_ms=2000, concurrency=8, grace_s=2.0,
                       backoff=BackoffPolicy(base_ms=10, max_ms=50))


def jid() -> str:
    return generate("JOB")


@contextlib.asynccontextmanager
async def running(consumer: Consumer):  # type: ignore[no-untyped-def]
    task = asyncio.create_task(consumer.run())
    try:
        yield task
    finally:
        consumer.stop()
        await asyncio.wait_for(task, 10)


async def test_consumer_acks_every_job_once(queue: AsyncQueue, raw: redis.Redis) -> None:
    seen: list[str] = []

    async def handler(lease: Lease) -> None:
        seen.append(lease.id)

    ids = [jid() for _ in range(300)]
    await queue.enqueue_many([(i, b"") for i in ids])
    consumer = Consumer(queue, handler, options=FAST)
    async with running(consumer):
        await wait_for(lambda: _done(queue, 300))
    assert sorted(seen) == sorted(ids)
    assert consumer.stats.completed == 300
    assert consumer.stats.stale == consumer.stats.lost == 0
    assert set(assert_consistent(raw, queue.name).values()) == {"done"}


async def _done(queue: AsyncQueue, n: int) -> bool:
    return (await queue.stats()).done == n


async def test_sync_handlers_and_ack_results(queue: AsyncQueue, raw: redis.Redis) -> None:
    a = jid()
    await queue.enqueue(a, b"in")
    consumer = Consumer(queue, lambda lease: Ack(lease.payload + b"-out"), options=FAST)
    async with running(consumer):
        await wait_for(lambda: _done(queue, 1))
    assert raw.hget(f"emq:{{{queue.name}}}:job:{a}", "result") == b"in-out"


async def test_failures_back_off_then_die_with_the_error(conn: AsyncConnector, qname: str,
                                                         raw: redis.Redis) -> None:
    q = AsyncQueue(conn, qname, options=QueueOptions(max_attempts=3))
    calls = 0

    def handler(lease: Lease) -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError(f"bad {lease.attempt}")

    a = jid()
    await q.enqueue(a, b"")
    consumer = Consumer(q, handler, options=FAST)
    async with running(consumer):
        await wait_for(lambda: _dead(q))
    assert calls == 3 and consumer.stats.dead == 1 and consumer.stats.retried == 2
    error = raw.hget(f"emq:{{{qname}}}:job:{a}", "error")
    assert error is not None
    head, traceback = error.decode().split("\n", 1)  # type, message, then a bounded traceback
    assert head == "RuntimeError: bad 3" and traceback.startswith("Traceback (most recent call last):")
    assert assert_consistent(raw, qname) == {a: "dead"}


async def _dead(q: AsyncQueue) -> bool:
    return (await q.stats()).dead == 1


async def test_backoff_and_defer_outcomes(conn: AsyncConnector, qname: str) -> None:
    q = AsyncQueue(conn, qname, options=QueueOptions(max_attempts=2))
    answers = iter([Defer(10), Defer(10), Defer(10), Backoff("flaky", delay_ms=10), None])
    consumer = Consumer(q, lambda lease: next(answers), options=FAST)
    await q.enqueue(jid(), b"")
    async with running(consumer):
        await wait_for(lambda: _done(q, 1))
    s = consumer.stats
    assert (s.deferred, s.retried, s.completed, s.dead) == (3, 1, 1, 0)


async def test_a_lost_lease_cancels_the_handler_and_discards_it(conn: AsyncConnector, qname: str,
                                                                raw: redis.Redis) -> None:
    q = AsyncQueue(conn, qname)
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def slow(lease: Lease) -> None:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    a = jid()
    await q.enqueue(a, b"")
    # Its own upkeep off: the reap below is the only one (the consumer's could win the race).
    consumer = Consumer(q, slow, options=dataclasses.replace(FAST, maintenance=False))
    async with running(consumer):
        await asyncio.wait_for(started.wait(), 5)
        # Another party takes the job: its lease moves on (as after an expiry + re-claim).
        raw.zadd(f"emq:{{{qname}}}:active", {a: 0})
        assert await q.reap() == (1, 0)
        await asyncio.wait_for(cancelled.wait(), 5)
    assert consumer.stats.lost == 1 and consumer.stats.completed == 0
    assert raw.hget(f"emq:{{{qname}}}:job:{a}", "state") in (b"pending", b"active")


async def subscribed(raw: redis.Redis, channel: str) -> bool:
    """Someone listens on the shard channel (on a cluster: asked of the node that owns it).

    Through redis-py's ``pubsub_shardnumsub`` (its reply ``[(channel, count)]``), never
    ``execute_command("PUBSUB", "SHARDNUMSUB", ...)``: redis-py 8.2's RedisCluster merges
    that two-word spelling's unparsed node reply with the command's cluster callback, which
    raises ValueError (too many values to unpack) where 8.1 returned the raw reply."""
    kw = {"target_nodes": raw.get_node_from_key(channel)} if hasattr(raw, "get_node_from_key") else {}
    ((_, count),) = raw.pubsub_shardnumsub(channel, **kw)
    return int(count) >= 1


async def test_an_idle_consumer_wakes_on_admission(queue: AsyncQueue, raw: redis.Redis) -> None:
    # Its poll is an hour away (beat_ms): the job runs within the wait only if the wake
    # channel (or the hand-off on it) woke the consumer.
    started: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    consumer = Consumer(queue, lambda lease: started.set_result(lease.id),
                        options=ConsumerOptions(beat_ms=3_600_000, lease_ms=10_800_000))
    async with running(consumer):
        await wait_for(lambda: subscribed(raw, queue.keys["wake"]))  # idle, listening
        job = jid()
        await queue.enqueue(job, b"")
        assert await asyncio.wait_for(started, 30) == job


async def test_maintenance_promotes_delayed_jobs(queue: AsyncQueue) -> None:
    seen = asyncio.Event()
    await queue.admit(jid(), b"", delay_ms=100)
    consumer = Consumer(queue, lambda lease: seen.set(), options=FAST)
    async with running(consumer):
        await asyncio.wait_for(seen.wait(), 5)


async def test_shutdown_lets_running_handlers_finish(queue: AsyncQueue, raw: redis.Redis) -> None:
    release = asyncio.Event()
    started = asyncio.Event()

    async def handler(lease: Lease) -> None:
        started.set()
        await release.wait()

    await queue.enqueue_many([(jid(), b"") for _ in range(3)])
    consumer = Consumer(queue, handler, options=FAST)
    task = asyncio.create_task(consumer.run())
    await asyncio.wait_for(started.wait(), 5)
    consumer.stop()
    await asyncio.sleep(0.05)
    assert not task.done()
    release.set()
    await asyncio.wait_for(task, 5)
    assert consumer.stats.completed == 3


async def test_shutdown_hands_back_after_the_grace_period(queue: AsyncQueue, raw: redis.Redis) -> None:
    async def forever(lease: Lease) -> None:
        await asyncio.sleep(60)

    job = jid()
    await queue.enqueue(job, b"")
    opts = ConsumerOptions(beat_ms=20, lease_ms=60_000, grace_s=0.2)
    consumer = Consumer(queue, forever, options=opts)
    task = asyncio.create_task(consumer.run())
    await wait_for(lambda: _active(queue))
    consumer.stop()
    await asyncio.wait_for(task, 5)
    # handed back at once (not left to a 60 s lease): pending, no failure counted
    assert consumer.stats.handed_back == 1
    assert set(assert_consistent(raw, queue.name).values()) == {"pending"}
    row = await queue.job(job)
    assert row is not None and row["attempts"] == b"1" and "failures" not in row


async def test_a_hurried_stop_skips_the_grace_period(queue: AsyncQueue) -> None:
    async def forever(lease: Lease) -> None:
        await asyncio.sleep(60)

    await queue.enqueue(jid(), b"")
    consumer = Consumer(queue, forever, options=ConsumerOptions(beat_ms=20, lease_ms=60_000, grace_s=60))
    task = asyncio.create_task(consumer.run())
    await wait_for(lambda: _active(queue))
    consumer.stop()
    await asyncio.sleep(0.05)
    assert not task.done()  # waiting out the grace period for the handler
    consumer.stop(hurry=True)
    await asyncio.wait_for(task, 5)
    assert consumer.stats.handed_back == 1 and (await queue.stats()).pending == 1


async def _active(q: AsyncQueue) -> bool:
    return (await q.stats()).active == 1


async def test_consumer_rides_out_a_server_restart(own_server, raw: redis.Redis) -> None:  # type: ignore[no-untyped-def]
    conn = AsyncConnector.from_url(own_server.url, retry_budget_s=20)
    q = AsyncQueue(conn, "restart")
    done: set[str] = set()
    consumer = Consumer(q, lambda lease: done.add(lease.id), options=FAST)
    try:
        async with running(consumer):
            first = [jid() for _ in range(20)]
            await q.enqueue_many([(i, b"") for i in first])
            await wait_for(lambda: _true(len(done) == 20))
            aof = own_server.data_dir / "appendonlydir"  # kill -9 once the AOF holds them
            await wait_for(lambda: _true(all(any(i.encode() in f.read_bytes() for f in aof.glob("*.aof"))
                                             for i in first)))
            own_server.kill()
            await asyncio.sleep(0.3)  # the outage: the server stays down this long
            own_server.start()
            second = [jid() for _ in range(20)]
            await q.enqueue_many([(i, b"") for i in second])
            await wait_for(lambda: _true(len(done) == 40), within=20)
    finally:
        await conn.aclose()
    assert consumer.stats.errors >= 1


async def _true(value: bool) -> bool:
    return value


async def test_one_for_one_restarts_only_the_dead_child() -> None:
    starts: list[str] = []
    crash = asyncio.Event()

    async def flaky() -> None:
        starts.append("flaky")
        await crash.wait()
        crash.clear()
        raise RuntimeError("crash")

    async def steady() -> None:
        starts.append("steady")
        await asyncio.sleep(3600)

    sup = Supervisor([ChildSpec("flaky", flaky), ChildSpec("steady", steady)])
    task = asyncio.create_task(sup.run())
    await asyncio.sleep(0.05)
    crash.set()
    await asyncio.sleep(0.05)
    sup.stop()
    await asyncio.wait_for(task, 5)
    assert starts == ["flaky", "steady", "flaky"]


async def test_rest_for_one_restarts_the_later_children_in_order() -> None:
    events: list[str] = []
    crash = asyncio.Event()

    def child(name: str, crashes: bool = False):  # type: ignore[no-untyped-def]
        async def run() -> None:
            events.append(f"start {name}")
            try:
                if crashes:
                    await crash.wait()
                    crash.clear()
                    raise RuntimeError(name)
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                events.append(f"stop {name}")
                raise
        return run

    sup = Supervisor([ChildSpec("a", child("a")), ChildSpec("b", child("b", True)),
                      ChildSpec("c", child("c")), ChildSpec("d", child("d"))],
                     strategy="rest_for_one")
    task = asyncio.create_task(sup.run())
    await asyncio.sleep(0.05)
    crash.set()
    await asyncio.sleep(0.05)
    sup.stop()
    await asyncio.wait_for(task, 5)
    assert events == ["start a", "start b", "start c", "start d",
                      "stop d", "stop c", "start b", "start c", "start d",
                      "stop d", "stop c", "stop b", "stop a"]


async def test_restart_intensity_gives_up_loudly() -> None:
    async def dies() -> None:
        raise RuntimeError("always")

    sup = Supervisor([ChildSpec("dies", dies)], max_restarts=3, period_s=10)
    with pytest.raises(SupervisorGaveUp):
        await asyncio.wait_for(sup.run(), 5)
    assert sup.restart_count == 4


async def test_a_blocking_handler_does_not_starve_heartbeats(queue: AsyncQueue,
                                                             raw: redis.Redis) -> None:
    def blocking(lease: Lease) -> None:
        time.sleep(3.0)  # three leases long: only heartbeats keep the job

    a = jid()
    await queue.enqueue(a, b"")
    # Leases of 1 s, beats of 100 ms: ten beats per lease. With 300 ms leases a loaded
    # 2-core CI run (the cluster's six nodes beside four workers) once went 300 ms between
    # two of this loop's turns and lost the lease: a scheduling gap, not a starved beat.
    consumer = Consumer(queue, blocking,
                        options=ConsumerOptions(beat_ms=100, lease_ms=1000, grace_s=5.0))
    async with running(consumer):
        await wait_for(lambda: _done(queue, 1))
    assert consumer.stats.lost == 0 and consumer.stats.completed == 1
    assert raw.hget(f"emq:{{{queue.name}}}:job:{a}", "attempts") == b"1"
