"""``echomq.client.lanes.enqueue`` (asyncio only): the admission of a job onto a serial lane."""

from __future__ import annotations

import redis

from echomq import AsyncConnector, AsyncQueue, Verdict, generate
from echomq.client import lanes


async def test_lanes_enqueue_admits_onto_a_serial_lane(queue: AsyncQueue, raw: redis.Redis) -> None:
    conn: AsyncConnector = queue.connector
    a, b = generate("JOB"), generate("JOB")
    assert await lanes.enqueue(conn, queue.name, "player-7", a, b"1", serial=True) is Verdict.ENQUEUED
    assert await lanes.enqueue(conn, queue.name, "player-7", a, b"2", serial=True) is Verdict.DUPLICATE
    assert await lanes.enqueue(conn, queue.name, "player-7", b, b"3", serial=True) is Verdict.ENQUEUED
    row = raw.hgetall(queue.job_key(a))
    assert (row[b"lane"], row[b"serial"], row[b"payload"]) == (b"player-7", b"1", b"1")
    (lease,) = await queue.claim(5, lease_ms=10_000)  # serial: one job of the lane at a time
    assert lease.id == a
