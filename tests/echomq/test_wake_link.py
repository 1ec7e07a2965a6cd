"""The consumer's wake link (echomq.runtime.wake_link, docs/decisions/0025-wake-link.md): the wake
channel read inline on the subscribed connection, re-subscribed after a drop, and a
consumer that parks only while it can hear hand-offs. Real servers, both topologies."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster

from echomq import AsyncQueue, Verdict, generate
from echomq.core.errors import ServerUnavailable
from echomq.protocol.scripts import load as load_script
from echomq.runtime.consumer import Consumer, ConsumerOptions
from echomq.runtime.parking import FIRST_SCRIPTS
from echomq.runtime.wake_link import WakeLink, attach
from tests.echomq.test_handoff import running, until

IDLE = ConsumerOptions(beat_ms=5000, lease_ms=20_000, concurrency=4, grace_s=2.0)
"""A long beat: no poll stands in for a wake-up the link should have delivered."""


def jid() -> str:
    return generate("JOB")


def spublish(raw: Any, channel: str, data: bytes) -> None:
    raw.execute_command("SPUBLISH", channel, data)


def kill_wake_connections(raw: Any) -> int:
    """CLIENT KILL every pub/sub connection of the backend (every primary on a cluster)."""
    if isinstance(raw, RedisCluster):
        killed = raw.execute_command("CLIENT KILL", "TYPE", "pubsub",
                                     target_nodes=RedisCluster.PRIMARIES)
        return sum(killed.values()) if isinstance(killed, dict) else int(killed)
    return int(raw.execute_command("CLIENT KILL", "TYPE", "pubsub"))


async def gets(check: Callable[[], Awaitable[bool] | bool]) -> None:
    await until(check, 30)


async def test_bytes_buffered_before_the_takeover_are_not_lost(queue: AsyncQueue,
                                                               raw: redis.Redis) -> None:
    sub: Any = await queue.wake_subscription()
    channel = queue.keys["wake"]
    reader = sub.pubsub.connection._reader
    await gets(lambda: b"ssubscribe" in bytes(reader._buffer))  # confirmation read, not parsed
    spublish(raw, channel, b"JOB-early")
    await gets(lambda: b"JOB-early" in bytes(reader._buffer))
    heard: list[bytes] = []
    ready: list[bool] = []
    link = attach(sub, heard.append, lambda: ready.append(True))
    try:
        assert link.ready and ready == [True] and heard == [b"JOB-early"]
        spublish(raw, channel, b"EMQH|tok|JOB-x|1|123|pay|load")  # any byte in the payload
        await gets(lambda: len(heard) == 2)
        assert heard[1] == b"EMQH|tok|JOB-x|1|123|pay|load"
    finally:
        await sub.aclose()
    reason = await asyncio.wait_for(link.closed, 10)
    assert isinstance(reason, ServerUnavailable) and not link.ready


async def test_a_lost_slot_a_refusal_or_a_push_frame_are_read_as_the_server_sends_them() -> None:
    # The frames a shard subscription can receive, in RESP2 and RESP3 form, fed to the link.
    heard: list[bytes] = []
    link = WakeLink(heard.append)
    link.data_received(b"*3\r\n$10\r\nssubscribe\r\n$1\r\nc\r\n:1\r\n")
    assert link.ready
    link.data_received(b">3\r\n$8\r\nsmessage\r\n$1\r\nc\r\n$4\r\nJOB1\r\n*3\r\n$8\r\nsmes")
    link.data_received(b"sage\r\n$1\r\nc\r\n$4\r\nJOB2\r\n")  # a frame split across reads
    assert heard == [b"JOB1", b"JOB2"] and not link.closed.done()
    link.data_received(b"*3\r\n$12\r\nsunsubscribe\r\n$1\r\nc\r\n:0\r\n")  # the slot moved
    assert link.closed.done() and "slot left" in str(link.closed.result()) and not link.ready

    refused = WakeLink(heard.append)
    refused.data_received(b"-NOPERM this user has no permissions to access the 'c' channel\r\n")
    assert isinstance(refused.closed.result(), ServerUnavailable)
    assert "NOPERM" in str(refused.closed.result())

    garbled = WakeLink(heard.append)
    garbled.data_received(b"?not resp\r\n")
    assert garbled.closed.done()  # a protocol error ends the link (it is subscribed again)


async def test_a_consumer_hears_again_after_its_wake_connection_is_killed(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    seen: list[str] = []
    consumer = Consumer(queue, lambda lease: seen.append(lease.id), options=IDLE)
    parked = queue.keys["parked"]
    async with running(consumer):
        await gets(lambda: consumer._parking.hearing and raw.zcard(parked) == 1)
        assert kill_wake_connections(raw) >= 1
        await gets(lambda: consumer.stats.errors >= 1)  # it noticed: deaf until subscribed again
        await gets(lambda: consumer._parking.hearing and raw.zcard(parked) == 1)
        a = jid()
        await queue.enqueue(a, b"after the drop")
        await gets(lambda: consumer.stats.completed == 1)
        assert seen == [a]
        assert consumer.stats.handed_off == 1  # leased to it by the admission: it heard


async def test_a_consumer_parks_again_while_a_handed_off_job_still_runs(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    release = threading.Event()
    started: list[str] = []

    def handler(lease: Any) -> None:
        started.append(lease.id)
        assert release.wait(30)

    consumer = Consumer(queue, handler, options=IDLE)
    parked = queue.keys["parked"]
    async with running(consumer):
        await gets(lambda: consumer._parking.hearing and raw.zcard(parked) == 1)
        a, b = jid(), jid()
        await queue.enqueue(a, b"first")
        await gets(lambda: started == [a])
        assert consumer.stats.handed_off == 1
        # The admission used the registration up; it comes back while the first job runs
        # (not only after it finishes), so the next job is handed off too.
        await gets(lambda: raw.zcard(parked) == 1)
        await queue.enqueue(b, b"second")
        await gets(lambda: started == [a, b])
        assert consumer.stats.handed_off == 2
        release.set()
        await gets(lambda: consumer.stats.completed == 2)


@pytest.mark.parametrize("handoff", [True, False])
async def test_an_idle_consumer_is_woken_by_the_link_not_by_its_beat(
        queue: AsyncQueue, raw: redis.Redis, handoff: bool) -> None:
    # With a one-hour beat no poll comes within the test: each job admitted into the idle
    # queue runs only by the hand-off, or (handoff=False) by the id on the wake channel and
    # a claim. A consumer that waited for its beat would time out in gets().
    seen: list[str] = []
    opts = ConsumerOptions(beat_ms=3_600_000, lease_ms=10_800_000, concurrency=4, grace_s=2.0,
                           handoff=handoff)
    consumer = Consumer(queue, lambda lease: seen.append(lease.id), options=opts)
    parked = queue.keys["parked"]
    async with running(consumer):
        for n in range(3):
            await gets(lambda: consumer._parking.hearing
                       and raw.zcard(parked) == (1 if handoff else 0))
            await queue.enqueue(jid(), b"x")
            await gets(lambda n=n: consumer.stats.completed == n + 1)  # no beat: the link did
    assert consumer.stats.handed_off == (3 if handoff else 0) and len(seen) == 3


def on_every_primary(raw: Any, *command: Any) -> list[Any]:
    """The replies of ``command`` on the server, or of each primary of the cluster."""
    if isinstance(raw, RedisCluster):
        replies = raw.execute_command(*command, target_nodes=RedisCluster.PRIMARIES)
        return list(replies.values()) if isinstance(replies, dict) else [replies]
    return [raw.execute_command(*command)]


async def test_a_starting_consumer_loads_what_its_first_jobs_run(queue: AsyncQueue,
                                                                 raw: redis.Redis) -> None:
    # Its first claim and its first finish wait on no NOSCRIPT round (decision 0026).
    on_every_primary(raw, "SCRIPT", "FLUSH")
    shas = [load_script(name).sha for name in FIRST_SCRIPTS]
    consumer = Consumer(queue, lambda lease: None, options=IDLE)
    async with running(consumer):
        await gets(lambda: consumer._parking.hearing and raw.zcard(queue.keys["parked"]) == 1)
        assert consumer.stats.claimed == 0  # no job yet: nothing ran claim, finish or beat
        for exists in on_every_primary(raw, "SCRIPT", "EXISTS", *shas):
            assert list(exists) == [1] * len(shas)


async def test_a_serial_lane_runs_its_jobs_back_to_back_not_a_beat_apart(
        queue: AsyncQueue) -> None:
    # One serial lane: each job waits for the one before it to finish. The drain loop
    # idles on a flush that could claim nothing (the lane busy) until a handler finishes;
    # a finish (or a wake-up) that came while that flush was in flight was dropped and
    # waited for the next beat. With a one-hour beat, 60 jobs of ~1 ms all run (within
    # until's bound) only if no finish is ever lost.
    n, ran = 60, []

    def handler(lease: Any) -> None:
        time.sleep(0.001)
        ran.append(lease.id)

    ids = [jid() for _ in range(n)]
    assert await queue.admit_many([(i, b"x", "s") for i in ids], serial=True) == [
        Verdict.ENQUEUED] * n
    opts = ConsumerOptions(beat_ms=3_600_000, lease_ms=10_800_000, concurrency=4, grace_s=2.0)
    consumer = Consumer(queue, handler, options=opts)
    async with running(consumer):
        await until(lambda: consumer.stats.completed == n, 55)  # a lost finish waits an hour
    assert ran == ids  # the lane's order
