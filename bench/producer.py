"""Admissions/s through the public API, ids minted in the timed window: one large
``enqueue_many``, sequential ``enqueue_many`` calls of 1,000, and ``Producer.put`` one by one.

    .venv/bin/python bench/producer.py [--jobs 200000] [--payload 64]

One embedded Valkey (no persistence), one asyncio client process, a fresh queue per row
(so every row starts from an empty pending set of the same size). Prints wall-clock
admissions/s and the client's CPU per job (``time.process_time``). Issue 15 item 3 asks
that the producer (and so sequential batches of 1,000 fed through it) match one large call.
Numbers move between runs on a shared machine: compare rows within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections.abc import Awaitable, Callable

from echomq import AsyncConnector, AsyncQueue, Producer, Verdict, generate, generate_many
from echomq.servers.server import EmbeddedValkey


async def one_call(q: AsyncQueue, n: int, payload: bytes) -> None:
    verdicts = await q.enqueue_many([(j, payload) for j in generate_many("JOB", n)])
    assert verdicts.count(Verdict.ENQUEUED) == n


async def calls_of_1000(q: AsyncQueue, n: int, payload: bytes) -> None:
    for i in range(0, n, 1000):
        verdicts = await q.enqueue_many([(generate("JOB"), payload) for _ in range(min(1000, n - i))])
        assert verdicts.count(Verdict.ENQUEUED) == len(verdicts)


async def producer_puts(q: AsyncQueue, n: int, payload: bytes) -> None:
    futures = []
    async with Producer(q) as producer:
        for _ in range(n):
            futures.append(await producer.put(generate("JOB"), payload))
    assert sum(f.result() is Verdict.ENQUEUED for f in futures) == n


async def run(url: str, n: int, payload: bytes) -> None:
    conn = AsyncConnector.from_url(url)
    rows: list[tuple[str, Callable[[AsyncQueue, int, bytes], Awaitable[None]]]] = [
        ("enqueue_many, one call", one_call),
        ("enqueue_many, calls of 1,000", calls_of_1000),
        ("Producer.put one by one", producer_puts),
    ]
    try:
        for i, (label, fn) in enumerate(rows):
            q = AsyncQueue(conn, f"bench-producer-{i}")
            await q.enqueue(generate("JOB"), b"warm")
            wall, cpu = time.perf_counter(), time.process_time()
            await fn(q, n, payload)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            print(f"{label:<30} {n / wall:>9,.0f} admissions/s   client CPU {cpu / n * 1e6:5.1f} µs/job")
    finally:
        await conn.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200_000)
    parser.add_argument("--payload", type=int, default=64)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus; {args.jobs:,} jobs per row")
    with EmbeddedValkey(appendonly=False) as server:
        asyncio.run(run(server.url, args.jobs, b"x" * args.payload))


if __name__ == "__main__":
    main()
