"""Results and waiting for them (issue 14 item 5; docs/decisions/0023), on both topologies.

* A done job's result is the bytes its attempt completed with, kept with the row (the
  payload dropped); a dead job's result is its error (JobFailed); a cancelled job's says
  cancelled (JobCancelled); no row is JobNotFound; not ended in time is ResultTimeout.
* ``result()`` wakes on the queue's ``finished`` shard channel: a waiter makes two row
  reads before the end and one after it, however long it waits (it does not poll).
* An end racing the waiter's subscription is never missed (many rounds, both orders).
* Waiting leaves no key behind (a shard channel is not a key).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
import redis

from echomq import (
    AsyncQueue,
    Connector,
    JobCancelled,
    JobFailed,
    JobNotFound,
    Queue,
    QueueOptions,
    ResultTimeout,
    generate,
)
from tests.conftest import keys_of
from tests.echomq._async.support import wait_for
from tests.echomq.invariants import assert_consistent
from tests.echomq.test_consumer import subscribed


async def _listening(raw: redis.Redis, q: AsyncQueue) -> None:
    """A waiter is subscribed to the queue's finished channel (the condition the waits
    below used to sleep for)."""
    await wait_for(lambda: subscribed(raw, q.keys["finished"]), 30)


async def _leased(q: AsyncQueue, payload: bytes = b"p") -> Any:
    jid = generate("JOB")
    await q.enqueue(jid, payload)
    (lease,) = await q.claim(1, lease_ms=60_000)
    assert lease.id == jid
    return lease


async def _two(calls: list[str]) -> bool:
    return len(calls) >= 2


def _counting(conn: Any) -> list[str]:
    """Record the name of every script the connector runs (the waiter's own connector). A
    waiter reads rows through ``run`` alone (a builder's call: on one server it goes over
    the bulk wire without passing ``eval``, decision 0050), on both topologies."""
    calls: list[str] = []
    original = conn.run

    async def counted(call: Any) -> Any:
        calls.append(call.script.name)
        return await original(call)

    conn.run = counted
    return calls


async def test_a_waiter_wakes_on_completion_with_the_result_without_polling(
        queue: AsyncQueue, raw: redis.Redis, backend_url: str) -> None:
    lease = await _leased(queue)
    other = type(queue.connector).from_url(backend_url)  # the waiter's own connections
    try:
        calls = _counting(other)
        waiter = asyncio.create_task(AsyncQueue(other, queue.name).result(lease.id, timeout=60))
        await _listening(raw, queue)
        await wait_for(lambda: _two(calls), 30)  # the check, then the check after subscribing
        # A window to see the waiter idle: one that polled would read the row again in it.
        await asyncio.sleep(0.5)
        assert not waiter.done()
        assert calls == ["row", "row"], calls  # before the end: the check, then the check after subscribing
        await queue.complete(lease, b'{"answer": 42}')
        assert await asyncio.wait_for(waiter, 30) == b'{"answer": 42}'
        assert calls == ["row", "row", "row"], calls  # one read after it was told
    finally:
        await other.aclose()
    row = await queue.job(lease.id) or {}
    assert row["state"] == b"done" and row["result"] == b'{"answer": 42}' and b"payload" not in row
    assert await queue.result(lease.id, timeout=0) == b'{"answer": 42}'  # kept with the row
    assert keys_of(raw, queue.name) == {queue.keys["done"], queue.keys["meta"], queue.job_key(lease.id)}


async def test_a_dead_jobs_result_is_its_error_and_a_cancelled_ones_says_so(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    one = AsyncQueue(queue.connector, queue.name, options=QueueOptions(max_attempts=1))
    lease = await _leased(one)
    waiter = asyncio.create_task(queue.result(lease.id, timeout=60))
    await _listening(raw, queue)
    assert (await one.retry(lease, delay_ms=0, error="ValueError: bad input\ntraceback")).value == "dead"
    with pytest.raises(JobFailed, match="bad input") as failed:
        await asyncio.wait_for(waiter, 30)
    assert failed.value.error == "ValueError: bad input\ntraceback" and failed.value.failures == 1
    later = generate("JOB")
    await queue.admit(later, b"x", delay_ms=3_600_000)
    waiter = asyncio.create_task(queue.result(later, timeout=60))
    await _listening(raw, queue)
    await queue.cancel([later])
    with pytest.raises(JobCancelled):
        await asyncio.wait_for(waiter, 30)
    with pytest.raises(JobNotFound):
        await queue.result(generate("JOB"), timeout=5)


async def test_not_ended_in_time_is_a_timeout_and_not_kept_is_not_found(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    lease = await _leased(queue)
    t0 = time.monotonic()
    with pytest.raises(ResultTimeout, match="active") as late:
        await queue.result(lease.id, timeout=0.3)
    assert time.monotonic() - t0 >= 0.3 and late.value.state == "active"
    with pytest.raises(ResultTimeout):
        await queue.result(lease.id, timeout=0)  # looks once
    drop = AsyncQueue(queue.connector, queue.name, options=QueueOptions(keep_done_ms=0))
    waiter = asyncio.create_task(queue.result(lease.id, timeout=60))
    await _listening(raw, queue)
    await drop.complete(lease, b"gone")
    with pytest.raises(JobNotFound):  # keep_done_ms=0 keeps no result: the waiter says so
        await asyncio.wait_for(waiter, 30)


async def test_an_end_racing_the_subscription_is_never_missed(queue: AsyncQueue,
                                                              backend_url: str) -> None:
    """The end lands before, during or after the waiter's subscribe: it always returns."""
    other = type(queue.connector).from_url(backend_url)
    waiting = AsyncQueue(other, queue.name)
    try:
        for i in range(40):
            lease = await _leased(queue)
            result = f"r{i}".encode()
            waiter = asyncio.create_task(waiting.result(lease.id, timeout=30))
            for _ in range(i % 4):
                await asyncio.sleep(0)  # move the end across the waiter's steps
            await queue.complete(lease, result)
            assert await asyncio.wait_for(waiter, 60) == result, i
    finally:
        await other.aclose()


async def test_many_waiters_on_one_queue_each_get_their_own_result(queue: AsyncQueue,
                                                                   raw: redis.Redis) -> None:
    leases = [await _leased(queue) for _ in range(12)]
    waiters = [asyncio.create_task(queue.result(x.id, timeout=60)) for x in leases]
    await _listening(raw, queue)  # (an end before a waiter subscribes is not missed either)
    await queue.complete_many(leases[:6], [x.id.encode() for x in leases[:6]])  # one batch
    for x in leases[6:]:
        await queue.complete(x, x.id.encode())
    assert await asyncio.wait_for(asyncio.gather(*waiters), 60) == [x.id.encode() for x in leases]
    assert assert_consistent(raw, queue.name) == {x.id: "done" for x in leases}


def test_the_blocking_api_waits_in_a_thread_for_a_completion_elsewhere(
        sync_conn: Connector, qname: str, backend_url: str, raw: redis.Redis) -> None:
    q = Queue(sync_conn, qname)
    jid = generate("JOB")
    q.enqueue(jid, b"p")
    (lease,) = q.claim(1, lease_ms=60_000)
    got: list[bytes] = []
    waiter = threading.Thread(target=lambda: got.append(q.result(jid, timeout=60)))
    waiter.start()
    give_up = time.monotonic() + 30
    while not asyncio.run(subscribed(raw, q.keys["finished"])):  # the thread is waiting
        assert time.monotonic() < give_up, "the waiter never subscribed"
        time.sleep(0.01)
    worker = type(sync_conn).from_url(backend_url)
    try:
        Queue(worker, qname).complete(lease, b"sync result")
    finally:
        worker.close()
    waiter.join(60)
    assert got == [b"sync result"]


def test_the_keyspace_after_results_is_only_rows_and_sets(raw: redis.Redis, sync_conn: Connector,
                                                         qname: str) -> None:
    q = Queue(sync_conn, qname)
    ids = [generate("JOB") for _ in range(3)]
    q.enqueue_many([(i, b"p") for i in ids])
    for lease in q.claim(3, lease_ms=60_000):
        q.complete(lease, b"r")
    assert [q.result(i, timeout=5) for i in ids] == [b"r"] * 3
    assert keys_of(raw, qname) == {q.keys["done"], q.keys["meta"], *(q.job_key(i) for i in ids)}
    assert set(assert_consistent(raw, qname)) == set(ids)
