"""The streaming producer (issue 15 item 3) on real servers, both topologies."""

from __future__ import annotations

import socket
from collections.abc import Iterable
from typing import Any

import pytest
import redis

from echomq import (
    AsyncClusterConnector,
    AsyncConnector,
    AsyncQueue,
    EchoMQError,
    InvalidArgument,
    InvalidJobId,
    ServerUnavailable,
    Verdict,
    generate,
    generate_many,
)
from echomq.client.producer import Producer, ProducerClosed


class CountingQueue(AsyncQueue):
    """The real queue, counting how many enqueue_many flushes run at once."""

    running = 0
    most = 0
    sizes: list[int]

    async def enqueue_many(self, pairs: Iterable[tuple[str, bytes]]) -> list[Verdict | EchoMQError]:
        items = list(pairs)
        self.sizes.append(len(items))
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            return await super().enqueue_many(items)
        finally:
            self.running -= 1


def counting(queue: AsyncQueue) -> CountingQueue:
    q = CountingQueue(queue.connector, queue.name, options=queue.options)
    q.sizes = []
    return q


def pending(raw: redis.Redis, queue: AsyncQueue) -> int:
    return int(raw.zcard(f"emq:{{{queue.name}}}:pending"))


async def test_verdicts_exact_and_in_input_order(queue: AsyncQueue, raw: redis.Redis) -> None:
    old = generate("JOB")
    assert await queue.enqueue(old, b"old") is Verdict.ENQUEUED
    fresh = generate_many("JOB", 3000)
    items: list[tuple[str, bytes]] = [(j, b"p") for j in fresh]
    # repeats: right after the first (same flush), far after (a later flush), and of a job
    # admitted before; a malformed id and a wrong kind in their places
    items[1] = (fresh[0], b"again")
    items[1500] = (fresh[10], b"again")
    items[2999] = (fresh[2998], b"again")
    items[700] = (old, b"new")
    items[800] = ("not-an-id", b"x")
    items[900] = (generate("ORD"), b"kind")
    q = counting(queue)
    async with Producer(q, flush_size=250, max_buffered=1000) as producer:
        futures = [await producer.put(j, p) for j, p in items]
    results = [f.result() for f in futures]
    expect: list[object] = []
    seen = {old}
    for j, _ in items:
        if j == "not-an-id":
            expect.append(InvalidJobId)
        elif j.startswith("ORD"):
            expect.append(Verdict.KIND)
        elif j in seen:
            expect.append(Verdict.DUPLICATE)
        else:
            seen.add(j)
            expect.append(Verdict.ENQUEUED)
    got = [type(r) if isinstance(r, EchoMQError) else r for r in results]
    assert got == expect
    assert pending(raw, queue) == len(seen)  # every new job, once (old included)
    assert raw.hget(f"emq:{{{queue.name}}}:job:{old}", "payload") == b"old"
    assert raw.hget(f"emq:{{{queue.name}}}:job:{fresh[0]}", "payload") == b"p"
    assert q.most == 2  # two flushes in flight, never more
    assert max(q.sizes) <= 250 and sum(q.sizes) == len(items)


async def test_repeated_id_waits_for_the_flush_that_holds_it(queue: AsyncQueue, raw: redis.Redis) -> None:
    a, b = generate("JOB"), generate("JOB")
    producer = Producer(queue, flush_size=1, max_buffered=10)
    first = await producer.put(a, b"1")  # a flush of its own, in flight
    second = await producer.put(a, b"2")  # same id: must wait for that flush
    third = await producer.put(b, b"3")
    await producer.aclose()
    assert [first.result(), second.result(), third.result()] == [
        Verdict.ENQUEUED, Verdict.DUPLICATE, Verdict.ENQUEUED]
    assert raw.hget(f"emq:{{{queue.name}}}:job:{a}", "payload") == b"1"


async def test_back_pressure_bounds_the_buffer(queue: AsyncQueue, raw: redis.Redis) -> None:
    producer = Producer(queue, flush_size=20, max_buffered=50)
    futures = []
    for j in generate_many("JOB", 1000):
        futures.append(await producer.put(j, b"x"))
        assert producer.outstanding <= 50
    # put returned for the 1000th job, so at most 50 were unanswered then
    assert sum(not f.done() for f in futures) <= 50
    await producer.aclose()
    assert all(f.result() is Verdict.ENQUEUED for f in futures)
    assert producer.outstanding == 0 and pending(raw, queue) == 1000


async def test_aclose_and_flush_drop_nothing(queue: AsyncQueue, raw: redis.Redis) -> None:
    producer = Producer(queue, flush_size=100, max_buffered=5000)
    futures = [await producer.put(j, b"x") for j in generate_many("JOB", 2500)]
    await producer.flush()
    assert all(f.done() for f in futures)
    later = [await producer.put(j, b"y") for j in generate_many("JOB", 777)]
    await producer.aclose()
    assert all(f.result() is Verdict.ENQUEUED for f in futures + later)
    assert pending(raw, queue) == 2500 + 777
    with pytest.raises(ProducerClosed):
        await producer.put(generate("JOB"), b"z")
    assert pending(raw, queue) == 2500 + 777


async def test_a_failed_flush_reports_to_each_job(backend: str) -> None:
    with socket.socket() as s:  # a closed loopback port: a dead server
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    conn: Any
    if backend == "cluster":
        conn = AsyncClusterConnector([("127.0.0.1", port)], retry_budget_s=0.1, socket_timeout=0.5)
    else:
        conn = AsyncConnector.from_url(f"redis://127.0.0.1:{port}", retry_budget_s=0.1, socket_timeout=0.5)
    producer = Producer(AsyncQueue(conn, "gone"), flush_size=10, max_buffered=100)
    futures = [await producer.put(j, b"x") for j in generate_many("JOB", 25)]
    await producer.aclose()
    await conn.aclose()
    for f in futures:
        with pytest.raises(ServerUnavailable):
            f.result()


@pytest.mark.parametrize(
    "kwargs", [{"flush_size": 0}, {"in_flight": 1}, {"max_buffered": 5, "flush_size": 10}])
async def test_bad_settings_are_refused(queue: AsyncQueue, kwargs: dict[str, int]) -> None:
    with pytest.raises(InvalidArgument):
        Producer(queue, **kwargs)
