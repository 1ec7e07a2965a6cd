"""The timings the cluster tests used to assert, measured here instead (issue 29 item 7).

    .venv/bin/python bench/cluster_timings.py [--runs 3]

On a fresh local 3+3 cluster (node timeout 2 s), per run: how long the cluster took to
come up healthy; a manual ``CLUSTER FAILOVER`` (the replica's promotion, in seconds) and
the longest gap between acknowledged admissions of one producer across it; a ``kill -9``
of a primary until its replica is promoted. The tests assert the behaviour (roles swap,
no admission fails, the acknowledged write survives); these figures are what it costs on
this machine, and they move with the load of a shared machine: read them, never assert.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from echomq import AsyncClusterConnector, AsyncQueue, generate
from echomq.servers.local_cluster import LocalCluster


class Producer:
    """Admits jobs one at a time (as tests/echomq/test_cluster.py's does); acknowledgment times."""

    def __init__(self, queue: AsyncQueue) -> None:
        self.queue, self.times, self.failed = queue, [], []  # type: ignore[var-annotated]
        self._stop = asyncio.Event()

    async def run(self) -> None:
        while not self._stop.is_set():
            try:
                await self.queue.enqueue(generate("JOB"), b"load")
            except Exception as exc:
                self.failed.append(exc)
                continue
            self.times.append(time.monotonic())
            await asyncio.sleep(0.002)

    def stop(self) -> None:
        self._stop.set()

    @property
    def longest_gap(self) -> float:
        return max((b - a for a, b in zip(self.times, self.times[1:], strict=False)), default=0.0)


async def _acked(producer: Producer, n: int) -> None:
    for _ in range(6000):  # 60 s at most
        if len(producer.times) >= n:
            return
        await asyncio.sleep(0.01)
    raise SystemExit(f"fewer than {n} admissions acknowledged in 60 s")


def _url(cluster: LocalCluster) -> str:
    return "redis+cluster://" + ",".join(f"{h}:{p}" for h, p in cluster.startup_nodes)


async def _failover_gap(cluster: LocalCluster) -> tuple[float, float]:
    conn = AsyncClusterConnector.from_url(_url(cluster))
    queue = AsyncQueue(conn, "timings")
    producer = Producer(queue)
    try:
        await queue.fence()
        task = asyncio.create_task(producer.run())
        await _acked(producer, 20)
        replica = cluster.replica_of(cluster.primary_for_key(queue.keys["pending"]))
        took = await asyncio.to_thread(cluster.failover, replica)
        await _acked(producer, len(producer.times) + 20)
        producer.stop()
        await task
        assert producer.failed == []
        return took, producer.longest_gap
    finally:
        await conn.aclose()


def _promotion(cluster: LocalCluster) -> float:
    primary = cluster.primary_for_key("timings-kill")
    replica = cluster.replica_of(primary)
    t0 = time.monotonic()
    cluster.kill_node(primary)
    while replica.role != "primary":
        if time.monotonic() - t0 > 60:
            raise SystemExit("replica not promoted in 60 s")
        time.sleep(0.02)
    return time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    rows = []
    for _ in range(args.runs):
        with LocalCluster(primaries=3, replicas_per_primary=1, node_timeout_ms=2000) as cluster:
            failover_s, gap_s = asyncio.run(_failover_gap(cluster))
            rows.append({"startup_s": round(cluster.startup_seconds, 2),
                         "manual_failover_s": round(failover_s, 3),
                         "longest_admission_gap_s": round(gap_s, 3),
                         "kill9_promotion_s": round(_promotion(cluster), 2)})
            print(json.dumps(rows[-1]), flush=True)


if __name__ == "__main__":
    main()
