"""``echomq info``'s library half: discovery, counts, recent rates, oldest age, live workers."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from echomq import AsyncQueue, QueueNotFound, generate
from echomq.client.info import discover_queues, queue_info, server_info
from echomq.client.registry import MinuteCounts, Registration


async def test_a_queue_is_found_with_its_counts_rates_age_and_workers(conn: Any, qname: str) -> None:
    q = AsyncQueue(conn, qname)
    ids = [generate("JOB") for _ in range(6)]
    for i in ids:
        await q.enqueue(i, b"x")
    (a, b) = await q.claim(2, lease_ms=60_000)
    await q.complete(a)
    await q.retry(b, delay_ms=0, error="ValueError: no")  # back to pending, one failure
    reg = Registration(conn, [qname], name="w1", beat_s=0.5, ttl_s=5,
                       about=lambda: {"concurrency": 4, "last_minute": {"processed": 7, "failed": 2}})
    await reg.beat()

    assert qname in await discover_queues(conn)
    info = await queue_info(conn, qname)
    assert (info.counts.pending, info.counts.active, info.counts.done) == (5, 0, 1)
    assert info.completed_last_minute == 1 and info.dead_last_minute == 0
    assert (info.processed_last_minute, info.failed_last_minute) == (7, 2)
    assert [w.name for w in info.workers] == ["w1"] and info.workers[0].about["concurrency"] == 4
    # The oldest pending job was admitted before this check began.
    assert info.oldest_pending_age_s is not None and 0 <= info.oldest_pending_age_s < 60
    assert json.loads(json.dumps(info.as_dict()))["counts"]["pending"] == 5

    whole = await server_info(conn, [qname])
    assert whole.workers == 1 and whole.version and whole.used_memory
    await reg.remove()
    assert (await queue_info(conn, qname)).workers == []


async def test_a_lapsed_worker_is_not_listed(conn: Any, qname: str) -> None:
    q = AsyncQueue(conn, qname)
    await q.enqueue(generate("JOB"), b"x")
    reg = Registration(conn, [qname], name="gone", beat_s=0.05, ttl_s=0.2)
    await reg.beat()
    assert [w.name for w in (await queue_info(conn, qname)).workers] == ["gone"]
    deadline = time.monotonic() + 10
    while (await queue_info(conn, qname)).workers:  # lapses on the server clock
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)


async def test_an_unknown_queue_is_not_found_rather_than_zeros(conn: Any, qname: str) -> None:
    with pytest.raises(QueueNotFound, match="does not exist"):
        await queue_info(conn, qname + "-typo")
    with pytest.raises(QueueNotFound):
        await server_info(conn, [qname + "-typo"])


async def test_overdue_leases_are_counted_until_reaped(conn: Any, qname: str) -> None:
    q = AsyncQueue(conn, qname)
    await q.enqueue(generate("JOB"), b"x")
    await q.claim(1, lease_ms=1)
    deadline = time.monotonic() + 10
    while (await queue_info(conn, qname)).overdue_leases != 1:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)
    await q.reap()
    info = await queue_info(conn, qname)
    assert info.overdue_leases == 0 and info.counts.pending == 1


def test_minute_counts_forget_after_a_minute() -> None:
    now = [1000.0]
    counts = MinuteCounts(clock=lambda: now[0])
    counts.add("processed", 3)
    now[0] += 30
    counts.add("processed")
    counts.add("failed")
    assert counts.totals() == {"processed": 4, "failed": 1}
    now[0] += 31
    assert counts.totals() == {"processed": 1, "failed": 1}
    now[0] += 60
    assert counts.totals() == {}
