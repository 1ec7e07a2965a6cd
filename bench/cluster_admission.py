"""Admissions/s on a local 3+3 cluster, with and without durable admission (WAIT 1).

    .venv/bin/python bench/cluster_admission.py [--seconds 3]

One process, asyncio: ``enqueue`` one at a time (a round trip each; WAIT adds its own
server-side wait for the replica's ack) and ``enqueue_many`` in batches of 1000 (one
WAIT per node per batch). Numbers move ~1.5x between runs on shared machines: compare
within one run. Results are recorded in docs/cluster.md.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from echomq import AsyncClusterConnector, AsyncQueue, QueueOptions, generate
from echomq.servers.local_cluster import LocalCluster


async def rate(queue: AsyncQueue, seconds: float, batch: int) -> float:
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        if batch == 1:
            await queue.enqueue(generate("JOB"), b"x" * 64)
        else:
            await queue.enqueue_many([(generate("JOB"), b"x" * 64) for _ in range(batch)])
        n += batch
    return n / (time.perf_counter() - t0)


async def run(cluster: LocalCluster, seconds: float) -> None:
    url = "redis+cluster://" + ",".join(f"{h}:{p}" for h, p in cluster.startup_nodes)
    conn = AsyncClusterConnector.from_url(url)
    try:
        for batch in (1, 1000):
            for durable in (0, 1):
                q = AsyncQueue(conn, f"bench-{batch}-{durable}",
                               options=QueueOptions(durable_replicas=durable))
                await q.enqueue(generate("JOB"), b"warm")
                r = await rate(q, seconds, batch)
                print(f"{'enqueue' if batch == 1 else 'enqueue_many/1000':<18} "
                      f"durable_replicas={durable}: {r:>9,.0f} admissions/s "
                      f"({1e6 / r:6.1f} µs each)")
    finally:
        await conn.aclose()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    with LocalCluster() as cluster:
        asyncio.run(run(cluster, args.seconds))


if __name__ == "__main__":
    main()
