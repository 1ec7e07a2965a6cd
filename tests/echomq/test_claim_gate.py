"""The claim gate under competition: claimers and consumers sharing the limits, and a
lower priority aging past a flood. Every count is taken from the server (lease deadlines
are server ms: claim time = deadline - lease_ms), never from client timing. Both
topologies. Pause, limits, priorities and bad arguments through the queue API, on both
APIs: tests/echomq/_async/test_gate.py."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from echomq import AsyncClusterConnector, AsyncConnector, AsyncQueue, Verdict, generate
from echomq.protocol.gate import PRIORITY_AGE, RateLimit
from echomq.protocol.scripts import bundle

LONG = 600_000


def jid() -> str:
    return generate("JOB")


def most_in_a_window(times: list[int], window_ms: int) -> int:
    """The largest number of ``times`` inside any half-open window of ``window_ms``."""
    times, most, j = sorted(times), 0, 0
    for i, t in enumerate(times):
        while times[j] <= t - window_ms:
            j += 1
        most = max(most, i - j + 1)
    return most


@pytest.mark.timeout(120)
async def test_four_competing_claimers_never_exceed_a_sliding_window(
        backend: str, backend_url: str, qname: str) -> None:
    """4 claimers, each its own connection, honour the reply's wait_ms; the server's claim
    times (lease deadline - lease_ms) never put more than 5 leases in any 400 ms window
    for the queue, nor more than 1 per lane in any 400 ms window."""
    limit, lane_limit, per_ms, lease_ms, n = 5, 1, 400, 60_000, 60
    kind: Any = AsyncClusterConnector if backend == "cluster" else AsyncConnector
    conns = [kind.from_url(backend_url) for _ in range(4)]
    queues = [AsyncQueue(c, qname) for c in conns]
    await queues[0].set_limits(rate=RateLimit(limit, per_ms), lane_rate=RateLimit(lane_limit, per_ms))
    await queues[0].admit_many([(jid(), b"", f"lane{i % 12}") for i in range(n)])
    claims: list[tuple[int, str]] = []
    held = 0

    async def claimer(q: AsyncQueue) -> None:
        nonlocal held
        while len(claims) < n:
            got = await q.claim(3, lease_ms=lease_ms)
            claims.extend((x.deadline_ms - lease_ms, x.lane or "") for x in got)
            for x in got:
                await q.complete(x)
            if got.wait_ms is not None and not got:
                held += 1
                await asyncio.sleep(got.wait_ms / 1000)
            elif not got:
                await asyncio.sleep(0.01)

    try:
        await asyncio.wait_for(asyncio.gather(*(claimer(q) for q in queues)), 90)
        stats = await queues[0].stats()
    finally:
        for c in conns:
            await c.aclose()
    assert len(claims) == n and stats.done == n
    assert most_in_a_window([t for t, _ in claims], per_ms) <= limit
    for lane in {lane for _, lane in claims}:
        assert most_in_a_window([t for t, ln in claims if ln == lane], per_ms) <= lane_limit
    # ...and it binds: n leases at 5 per 400 ms take at least (n - 5) / 5 windows
    span = max(t for t, _ in claims) - min(t for t, _ in claims)
    assert span >= (n - limit) // limit * per_ms and held > 0


@pytest.mark.timeout(300)
async def test_a_lower_level_ages_past_a_flood_of_a_higher_one(queue: AsyncQueue) -> None:
    """The stated rule: a waiting job is overtaken by at most AGE * (p - q) jobs of level p
    per lane. A level-0 job waits behind at most 1000 level-1 jobs of a flooding lane."""
    low = jid()
    await queue.admit(low, b"", lane="low")
    flood = [(jid(), b"", "flood") for _ in range(PRIORITY_AGE + 200)]
    assert set(await queue.admit_many(flood, priority=1)) == {Verdict.ENQUEUED}
    position = None
    seen = 0
    while position is None:
        got = await queue.claim(100, lease_ms=LONG, window=200)
        assert got
        for x in got:
            if x.id == low:
                position = seen
            seen += 1
    assert 0 < position <= PRIORITY_AGE + 1


def test_the_priority_age_is_the_scripts() -> None:
    assert f"local AGE = {PRIORITY_AGE}" in bundle()["claim"].source


class CountingQueue(AsyncQueue):
    """Counts the drain flushes a consumer sends (a consumer that spun would send thousands)."""

    flushes = 0

    async def settle(self, *args: Any, **kwargs: Any) -> Any:
        CountingQueue.flushes += 1
        return await super().settle(*args, **kwargs)


@pytest.mark.timeout(180)
async def test_four_consumers_share_the_limits_and_park_instead_of_spinning(
        backend: str, backend_url: str, qname: str) -> None:
    """The issue's test: 4 consumers (each its own connection) compete for a queue limited
    to 5 leases per 500 ms and 1 per lane per 500 ms. The server's claim times (the lease
    deadline the claim script computed, minus lease_ms) never put more than 5 leases in any
    500 ms window, nor 2 of one lane; every job runs once; and held-back consumers park
    until the next token instead of polling (the flushes stay a small multiple of the jobs)."""
    from echomq import Ack, Consumer, ConsumerOptions

    limit, per_ms, n = 5, 500, 40
    opts = ConsumerOptions(concurrency=4, beat_ms=50, lease_ms=30_000, maintenance=False)
    kind: Any = AsyncClusterConnector if backend == "cluster" else AsyncConnector
    conns = [kind.from_url(backend_url) for _ in range(4)]
    CountingQueue.flushes = 0
    queues = [CountingQueue(c, qname) for c in conns]
    await queues[0].set_limits(rate=RateLimit(limit, per_ms), lane_rate=RateLimit(1, per_ms))
    claims: list[tuple[int, str, int]] = []

    async def handle(lease: Any) -> Ack:
        claims.append((lease.deadline_ms - opts.lease_ms, lease.lane or "", lease.attempt))
        return Ack()

    consumers = [Consumer(q, handle, options=opts) for q in queues]
    tasks = [asyncio.create_task(c.run()) for c in consumers]
    try:
        began = asyncio.get_running_loop().time()
        await queues[0].admit_many([(jid(), b"", f"chat{i % 10}") for i in range(n)])
        deadline = began + 120
        while (await queues[0].stats()).done < n:
            assert asyncio.get_running_loop().time() < deadline, "the jobs did not all run"
            await asyncio.sleep(0.05)
    finally:
        for c in consumers:
            c.stop()
        await asyncio.gather(*tasks)
        for c in conns:
            await c.aclose()
    assert len(claims) == n and {a for _, _, a in claims} == {1}  # each once, first attempt
    assert most_in_a_window([t for t, _, _ in claims], per_ms) <= limit
    for lane in {lane for _, lane, _ in claims}:
        assert most_in_a_window([t for t, ln, _ in claims if ln == lane], per_ms) == 1
    span = max(t for t, _, _ in claims) - min(t for t, _, _ in claims)
    assert span >= (n - limit) // limit * per_ms  # the limit binds
    # Parked until the next token: a few flushes per job, and at most two wake-ups per
    # consumer per token window however long the run took (a loaded machine stretches
    # it). Consumers polling at their 50 ms beat send 4 x 20 = 80 flushes a second (~300
    # in a quiet run): more than 3n + 16 a second for any run past 1.9 s, and the limit
    # makes every run last at least 3.5 s (the span above).
    elapsed = asyncio.get_running_loop().time() - began
    allowance = 3 * n + 2 * len(consumers) * elapsed * 1000 / per_ms
    assert CountingQueue.flushes < allowance, (CountingQueue.flushes, elapsed)
