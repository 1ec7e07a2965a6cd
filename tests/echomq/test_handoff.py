"""Hand-off on admission (docs/decisions/0018-hand-off.md): a parked consumer is leased the
next job in the admission's own step. On both topologies, real servers and processes."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import redis

from echomq import AsyncQueue, Lease, RateLimit, Verdict, generate
from echomq.core.errors import InvalidArgument
from echomq.core.model import Completion
from echomq.protocol.handoff import decode_handoff
from echomq.runtime.consumer import Consumer, ConsumerOptions

ROOT = Path(__file__).resolve().parents[2]
FAST = ConsumerOptions(beat_ms=20, lease_ms=2000, concurrency=8, grace_s=2.0)


def jid() -> str:
    return generate("JOB")


async def until(check: Callable[[], Awaitable[bool] | bool], seconds: float = 20.0) -> None:
    """Poll a condition with a bound (no sleep stands in for it)."""
    give_up = time.monotonic() + seconds
    while True:
        got = check()
        if not isinstance(got, bool):
            got = await got
        if got:
            return
        assert time.monotonic() < give_up, "condition not reached in time"
        await asyncio.sleep(0.01)


@contextlib.asynccontextmanager
async def running(consumer: Consumer) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(consumer.run())
    try:
        yield task
    finally:
        consumer.stop()
        await asyncio.wait_for(task, 15)


async def handoff_message(sub: Any, queue: AsyncQueue, token: str) -> Lease:
    give_up = time.monotonic() + 10
    while time.monotonic() < give_up:
        msg = await sub.get_message(ignore_subscribe_messages=True, timeout=1.0)
        if msg and isinstance(msg.get("data"), bytes) and msg["data"].startswith(b"EMQH|"):
            lease = decode_handoff(queue.name, token, msg["data"])
            assert lease is not None
            return lease
    raise AssertionError("no hand-off message")


def row(raw: redis.Redis, queue: AsyncQueue, job: str) -> dict[bytes, bytes]:
    # Without the admitting call's token ('tok', 16 characters: docs/protocol.md).
    row: dict[bytes, bytes] = raw.hgetall(queue.job_key(job))  # type: ignore[assignment]
    assert len(row.pop(b"tok", b"0123456789abcdef")) == 16
    return row


async def test_park_is_refused_while_pending_has_work(queue: AsyncQueue, raw: redis.Redis) -> None:
    await queue.enqueue(jid(), b"x")
    assert not await queue.park("t1", lease_ms=5000, ttl_ms=5000)
    assert not raw.exists(queue.keys["parked"])


async def test_bad_park_arguments_are_refused_before_any_io(queue: AsyncQueue, raw: redis.Redis) -> None:
    for token in ("", "a|b", "x" * 65, 7):
        with pytest.raises(InvalidArgument):
            await queue.park(token, lease_ms=5000, ttl_ms=5000)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        await queue.park("t1", lease_ms=0, ttl_ms=5000)
    with pytest.raises(InvalidArgument):
        await queue.park("t1", lease_ms=5000, ttl_ms=-1)
    assert not raw.exists(queue.keys["parked"])


async def test_admission_leases_the_job_to_the_parked_consumer_verdicts_in_order(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    sub = await queue.connector.wake_subscription(queue.keys["wake"])
    try:
        assert await queue.park("t1", lease_ms=30_000, ttl_ms=30_000)
        a, b, c = jid(), jid(), jid()
        verdicts = await queue.enqueue_many(
            [(a, b"p|0"), (b, b"p1"), (a, b"again"), (c, b"p2"), ("nope", b"")])
        assert verdicts[:4] == [Verdict.ENQUEUED, Verdict.ENQUEUED, Verdict.DUPLICATE, Verdict.ENQUEUED]
        assert isinstance(verdicts[4], Exception)
        lease = await handoff_message(sub, queue, "t1")
    finally:
        await sub.aclose()
    # The first job went to the parked consumer: active, attempt 1, its payload kept, leased.
    assert row(raw, queue, a) == {b"state": b"active", b"attempts": b"1", b"payload": b"p|0"}
    deadline = raw.zscore(queue.keys["active"], a)
    assert deadline is not None
    assert lease == Lease(queue=queue.name, id=a, attempt=1, payload=b"p|0", lane=None,
                          deadline_ms=int(deadline))
    # One registration, one job: the rest queue as usual, and the registration is used up.
    assert [x.decode() for x in raw.zrange(queue.keys["pending"], 0, -1)] == [b, c]
    assert not raw.exists(queue.keys["parked"])
    # The message names its consumer: another token reads nothing in it.
    msg = b"EMQH|t1|" + a.encode() + b"|1|" + str(int(deadline)).encode() + b"|p|0"
    assert decode_handoff(queue.name, "t2", msg) is None


async def test_a_handed_off_lease_is_fenced_and_reaped_like_any_other(queue: AsyncQueue,
                                                                        raw: redis.Redis) -> None:
    assert await queue.park("t1", lease_ms=400, ttl_ms=30_000)
    a = jid()
    assert await queue.enqueue(a, b"x") is Verdict.ENQUEUED
    deadline = int(raw.zscore(queue.keys["active"], a) or 0)
    lease = Lease(queue=queue.name, id=a, attempt=1, payload=b"x", lane=None, deadline_ms=deadline)
    assert await queue.heartbeat(lease, lease_ms=400) is not None  # the attempt holds the lease
    assert await queue.complete(dataclasses.replace(lease, attempt=2)) is Completion.STALE  # fence
    held = int(raw.zscore(queue.keys["active"], a) or 0)
    await until(lambda: _past(queue, held))
    await until(lambda: _reaped(queue))
    (again,) = await queue.claim(1, lease_ms=30_000)
    assert (again.id, again.attempt) == (a, 2)
    assert await queue.complete(lease) is Completion.STALE  # the handed-off attempt lost its lease
    assert await queue.complete(again) is Completion.COMPLETED
    assert row(raw, queue, a)[b"state"] == b"done"


async def _past(queue: AsyncQueue, ms: int) -> bool:
    return await queue.connector.server_time_ms() > ms


async def _reaped(queue: AsyncQueue) -> bool:
    return sum(await queue.reap()) == 1


async def test_an_expired_or_withdrawn_registration_gets_nothing(queue: AsyncQueue, raw: redis.Redis) -> None:
    assert await queue.park("t1", lease_ms=30_000, ttl_ms=50)
    expiry = int(raw.zscore(queue.keys["parked"], "30000|t1") or 0)
    await until(lambda: _past(queue, expiry))
    a = jid()
    await queue.enqueue(a, b"x")
    assert row(raw, queue, a)[b"state"] == b"pending"  # expired: no hand-off
    (lease,) = await queue.claim(1, lease_ms=30_000)
    assert await queue.complete(lease) is Completion.COMPLETED
    assert await queue.park("t2", lease_ms=30_000, ttl_ms=30_000)
    assert await queue.park("t2", lease_ms=30_000, ttl_ms=0)  # withdrawn
    assert not raw.exists(queue.keys["parked"])
    b = jid()
    await queue.enqueue(b, b"y")
    assert row(raw, queue, b)[b"state"] == b"pending"


async def test_an_idle_consumer_runs_a_handed_off_job_without_a_claim(queue: AsyncQueue,
                                                                        raw: redis.Redis) -> None:
    seen: list[tuple[str, int, bytes]] = []
    consumer = Consumer(queue, lambda lease: seen.append((lease.id, lease.attempt, lease.payload)),
                        options=ConsumerOptions(beat_ms=5000, lease_ms=20_000))
    a = jid()
    async with running(consumer):
        await until(lambda: bool(raw.exists(queue.keys["parked"])))
        await queue.enqueue(a, b"hello")
        await until(lambda: consumer.stats.completed == 1)
    assert seen == [(a, 1, b"hello")]
    assert consumer.stats.handed_off == 1 and consumer.stats.claimed == 1  # leased by no claim
    assert row(raw, queue, a)[b"state"] == b"done"
    assert not raw.exists(queue.keys["parked"])  # withdrawn at stop


async def test_nothing_is_lost_when_a_parked_consumer_dies(queue: AsyncQueue, raw: redis.Redis,
                                                          backend_url: str) -> None:
    # A consumer process parks (beat 2 s: its registration lives 6 s), then is killed -9.
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.echomq.worker_proc", backend_url, queue.name, "--beat", "2000",
        "--lease", "6000", cwd=ROOT, stdout=subprocess.DEVNULL)
    try:
        await until(lambda: bool(raw.exists(queue.keys["parked"])), 120)
        proc.send_signal(signal.SIGKILL)
        await asyncio.wait_for(proc.wait(), 30)
        a = jid()
        assert await queue.enqueue(a, b"x") is Verdict.ENQUEUED
        # The dead consumer's registration was still live: the job is leased to it.
        assert row(raw, queue, a) == {b"state": b"active", b"attempts": b"1", b"payload": b"x"}
        seen: list[tuple[str, int]] = []
        other = Consumer(queue, lambda lease: seen.append((lease.id, lease.attempt)), options=FAST)
        async with running(other):
            await until(lambda: bool(seen), 60)  # its lease expires, reap re-exposes it, it runs
            await until(lambda: other.stats.completed == 1)
        assert seen == [(a, 2)]
        assert row(raw, queue, a)[b"state"] == b"done"
        starts = [x for x in raw.lrange(f"testlog:{{{queue.name}}}", 0, -1) if x.startswith(b"start")]
        assert starts == []  # the killed consumer never ran it
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        raw.delete(f"testlog:{{{queue.name}}}")


async def test_no_hand_off_from_a_paused_queue(queue: AsyncQueue, raw: redis.Redis) -> None:
    # The claim gate (pause, rate limits) holds for the hand-off too: a job admitted to a
    # paused queue waits in pending for the gate, and the registration stays for later.
    await queue.pause()
    assert await queue.park("t1", lease_ms=30_000, ttl_ms=30_000)
    a = jid()
    assert await queue.enqueue(a, b"x") is Verdict.ENQUEUED
    assert row(raw, queue, a) == {b"state": b"pending", b"attempts": b"0", b"payload": b"x"}
    assert raw.zcard(queue.keys["active"]) == 0
    assert raw.zcard(queue.keys["parked"]) == 1
    assert (await queue.claim(1, lease_ms=1000)).paused
    await queue.resume()
    assert [x.id for x in await queue.claim(1, lease_ms=1000)] == [a]


async def test_a_hand_off_takes_a_rate_token_and_none_past_the_limit(queue: AsyncQueue,
                                                                      raw: redis.Redis) -> None:
    # 1 lease per minute: the first admission is handed off and counts against the limit,
    # so the second (pending empty again, a consumer parked) is not handed off, and a claim
    # of it is held back until the token is due.
    await queue.set_limits(rate=RateLimit(1, 60_000))
    assert await queue.park("t1", lease_ms=30_000, ttl_ms=30_000)
    assert await queue.park("t2", lease_ms=30_000, ttl_ms=30_000)
    a, b = jid(), jid()
    assert await queue.enqueue(a, b"x") is Verdict.ENQUEUED
    assert row(raw, queue, a)[b"state"] == b"active"
    assert raw.llen(queue.keys["rate"]) == 1
    assert await queue.enqueue(b, b"y") is Verdict.ENQUEUED
    assert row(raw, queue, b) == {b"state": b"pending", b"attempts": b"0", b"payload": b"y"}
    assert raw.zcard(queue.keys["parked"]) == 1  # t2 is still parked: it got nothing
    held = await queue.claim(1, lease_ms=1000)
    assert list(held) == [] and held.wait_ms is not None and 0 < held.wait_ms <= 60_000
    assert row(raw, queue, b)[b"attempts"] == b"0"
