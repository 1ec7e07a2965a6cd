"""The protocol version fence on every operation (issue 11, item 3; decision 0011).

A queue whose meta records another major version is refused by every method of the
queue, with ProtocolVersionError, and nothing in its keyspace changes (every key dumped
before and after). The check is not cached: the same connector that just worked is
refused as soon as the version changes, and works again when it changes back. A consumer
that meets another major version stops with ProtocolVersionError and a log line, and
writes nothing (not even its maintenance token). Runs on the single server and the cluster.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from typing import Any

import pytest
import redis

from echomq import (
    AsyncConnector,
    AsyncQueue,
    Lease,
    ProtocolVersionError,
    QueueOptions,
    RetryOutcome,
    Verdict,
    generate,
)
from echomq.protocol.gate import RateLimit
from echomq.runtime.consumer import Consumer, ConsumerOptions
from tests.conftest import keys_of

Op = Callable[[AsyncQueue, Lease, str], Any]

OPS: dict[str, Op] = {
    "enqueue": lambda q, x, d: q.enqueue(generate("JOB"), b"x"),
    "admit": lambda q, x, d: q.admit(generate("JOB"), b"x", lane="l", delay_ms=10),
    "claim": lambda q, x, d: q.claim(1, lease_ms=1000),
    "heartbeat": lambda q, x, d: q.heartbeat(x, lease_ms=1000),
    "heartbeat_many": lambda q, x, d: q.heartbeat_many([x], lease_ms=1000),
    "complete": lambda q, x, d: q.complete(x),
    "complete_many": lambda q, x, d: q.complete_many([x]),
    "settle": lambda q, x, d: q.settle([(x, b"")], count=1, lease_ms=1000, candidates=[], window=5),
    "retry": lambda q, x, d: q.retry(x, delay_ms=0),
    "defer": lambda q, x, d: q.defer(x, delay_ms=5),
    "job": lambda q, x, d: q.job(x.id),
    "result": lambda q, x, d: q.result(d, timeout=0),
    "progress": lambda q, x, d: q.progress(x.id),
    "report_progress": lambda q, x, d: q.report_progress(x, b"half"),
    "browse": lambda q, x, d: q.browse("pending"),
    "purge_dead": lambda q, x, d: q.purge_dead(limit=10),
    "requeue_dead": lambda q, x, d: q.requeue_dead(limit=10),
    "requeue": lambda q, x, d: q.requeue([d]),
    "purge": lambda q, x, d: q.purge("dead", [d]),
    "cancel": lambda q, x, d: q.cancel([x.id]),
    "promote": lambda q, x, d: q.promote(),
    "reap": lambda q, x, d: q.reap(),
    "expire": lambda q, x, d: q.expire(),
    "trim": lambda q, x, d: q.trim(),
    "stats": lambda q, x, d: q.stats(),
    "pending_size": lambda q, x, d: q.pending_size(),
    "fence": lambda q, x, d: q.fence(),
    "park": lambda q, x, d: q.park("t1", lease_ms=1000, ttl_ms=1000),
    "peek": lambda q, x, d: q.peek("pending", 5),
    "pause": lambda q, x, d: q.pause(),
    "resume": lambda q, x, d: q.resume(),
    "gate": lambda q, x, d: q.gate(),
    "set_limits": lambda q, x, d: q.set_limits(rate=RateLimit(3, 1000)),
    "search": lambda q, x, d: q.search(),
    "admit_flow": lambda q, x, d: q.admit_flow(parent=(generate("JOB"), b"p"),
                                               children=[(q.name, generate("JOB"), b"c")]),
    "children": lambda q, x, d: q.children(d),
    "cancel_flow": lambda q, x, d: q.cancel_flow(d),
}
BATCH = {  # bad news per item, in place
    "enqueue_many": lambda q, x, d: q.enqueue_many([(generate("JOB"), b"x")] * 2),
    "admit_many": lambda q, x, d: q.admit_many([(generate("JOB"), b"x", "l")]),
}
NO_IO = {"job_key"}
NO_SCRIPT = {"wake_subscription"}  # a subscription to the wake channel: no script, no fence


def _dump(raw: redis.Redis, queue: str) -> dict[str, bytes]:
    return {k: raw.dump(k) for k in sorted(keys_of(raw, queue))}


async def _setup(q: AsyncQueue) -> tuple[Lease, str]:
    """A queue with a pending job, a leased one, a delayed one and a dead one."""
    for _ in range(3):
        assert await q.enqueue(generate("JOB"), b"p") is Verdict.ENQUEUED
    await q.admit(generate("JOB"), b"later", delay_ms=60_000)
    lease, victim = await q.claim(2, lease_ms=60_000)
    one = AsyncQueue(q.connector, q.name, options=QueueOptions(max_attempts=1))
    assert await one.retry(victim, delay_ms=0) is RetryOutcome.DEAD
    return lease, victim.id


async def _call(op: Op, q: AsyncQueue, lease: Lease, dead: str) -> Any:
    result = op(q, lease, dead)
    return await result if inspect.isawaitable(result) else result


async def test_every_operation_is_refused_on_another_major_and_changes_nothing(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    assert {n for n in dir(AsyncQueue) if not n.startswith("_")} == set(OPS) | set(BATCH) | NO_IO | NO_SCRIPT
    lease, dead = await _setup(queue)
    meta = queue.keys["meta"]
    for version in ("echomq:4.0.0", "echomq:2.9.1", "garbage"):
        raw.hset(meta, "protocol", version)  # the same connector, no reconnect: not cached
        before = _dump(raw, queue.name)
        for op in OPS.values():
            with pytest.raises(ProtocolVersionError, match="EMQVERSION"):
                await _call(op, queue, lease, dead)
        for name, op in BATCH.items():
            got = await _call(op, queue, lease, dead)
            assert all(isinstance(v, ProtocolVersionError) for v in got), (name, got)
        assert _dump(raw, queue.name) == before, version
    raw.hset(meta, "protocol", "echomq:3.9.0")  # the same major again: everything works
    assert await queue.heartbeat(lease, lease_ms=60_000) is not None
    assert (await queue.stats()).dead == 1


async def test_a_consumer_meeting_another_major_stops_typed_and_touches_nothing(
        conn: AsyncConnector, qname: str, raw: redis.Redis,
        caplog: pytest.LogCaptureFixture) -> None:
    q = AsyncQueue(conn, qname)
    await q.enqueue(generate("JOB"), b"p")
    raw.hset(q.keys["meta"], "protocol", "echomq:4.0.0")
    before = _dump(raw, qname)
    ran: list[Lease] = []
    consumer = Consumer(q, ran.append, options=ConsumerOptions(beat_ms=20, lease_ms=1000))
    with (caplog.at_level(logging.ERROR, logger="echomq.runtime.consumer"),
          pytest.raises(ProtocolVersionError)):
        await asyncio.wait_for(consumer.run(), 30)
    assert not ran
    assert _dump(raw, qname) == before  # no lease, no maintenance token, nothing
    lines = [r.getMessage() for r in caplog.records if "stopped" in r.getMessage()]
    assert len(lines) == 1 and "echomq:4.0.0" in lines[0], lines


async def test_a_running_consumer_stops_when_the_version_changes_under_it(
        conn: AsyncConnector, qname: str, raw: redis.Redis) -> None:
    q = AsyncQueue(conn, qname)
    done: list[str] = []
    consumer = Consumer(q, lambda x: done.append(x.id),
                        options=ConsumerOptions(beat_ms=20, lease_ms=1000))
    task = asyncio.create_task(consumer.run())
    first = generate("JOB")
    await q.enqueue(first, b"p")
    for _ in range(1000):  # bounded poll for the condition: the first job finished
        if raw.zcard(q.keys["done"]) == 1:
            break
        await asyncio.sleep(0.01)
    assert done == [first] and raw.zcard(q.keys["done"]) == 1
    raw.hset(q.keys["meta"], "protocol", "echomq:4.0.0")
    with pytest.raises(ProtocolVersionError):
        await asyncio.wait_for(task, 30)
    assert raw.zcard(q.keys["pending"]) == 0 and raw.zcard(q.keys["active"]) == 0
