"""One logical queue with 1, 3 and 6 shards on a local cluster: admissions/s, drain/s and
the server CPU each operation costs on each node.

    .venv/bin/python bench/sharded_scaling.py [--jobs 40000] [--shards 1,3,6] [--replicas 0]

For each shard count, one asyncio client admits ``--jobs`` jobs with ``enqueue_many``
(batches of 1000, ``--inflight`` batches at once; each batch is one pipeline per shard,
the shards at once), then one ``ShardedConsumer`` (a consumer per shard, ``--concurrency``
slots in all, a no-op async handler) drains them. Around each phase it reads every
primary's process CPU (``INFO cpu``: user + sys) and its script time (``INFO
commandstats``, evalsha), and counts the jobs each node served (the shards it holds), so
it reports server µs per operation *per node*, plus the client's own CPU per operation.

The projection: each operation costs ``c`` µs of CPU on the node holding its shard; with
one core per primary, node ``i`` saturates at ``1e6 / (c_i * f_i)`` operations/s where
``f_i`` is its share of the operations, so one logical queue reaches
``min_i 1e6 / (c_i * f_i)``: ``1e6 / c`` on one shard, ``P * 1e6 / c`` on P primaries
with shards spread evenly (more shards than primaries add nothing). The run prints the
projection with the measured ``c`` and how busy each node was (CPU seconds per second):
a node near 1.0 is saturated and the measured rate should meet its projection there.
Numbers move up to ~1.5x between runs on a shared machine; quote µs per operation.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from typing import Any

from echomq import (
    AsyncClusterConnector,
    AsyncShardedQueue,
    ConsumerOptions,
    Lease,
    ShardedConsumer,
    generate_many,
    keyspace,
)
from echomq.servers.local_cluster import LocalCluster


def _cpu(node: Any) -> tuple[float, float, int]:
    """(process CPU seconds, evalsha µs, evalsha calls) of one node."""
    cpu = node.command("INFO", "cpu")
    stats = node.command("INFO", "commandstats")
    cpu = cpu if isinstance(cpu, dict) else {}
    stats = stats if isinstance(stats, dict) else {}
    ev = stats.get("cmdstat_evalsha", {})
    return (float(cpu.get("used_cpu_user", 0)) + float(cpu.get("used_cpu_sys", 0)),
            float(ev.get("usec", 0)), int(ev.get("calls", 0)))


def _snapshot(nodes: list[Any]) -> list[tuple[float, float, int]]:
    return [_cpu(n) for n in nodes]


async def _admit(q: AsyncShardedQueue, jobs: int, inflight: int) -> float:
    ids = generate_many("JOB", jobs)
    batches = [[(i, b"x" * 64) for i in ids[k:k + 1000]] for k in range(0, jobs, 1000)]
    t0 = time.perf_counter()
    sem = asyncio.Semaphore(inflight)

    async def one(batch: list[tuple[str, bytes]]) -> None:
        async with sem:
            got = await q.enqueue_many(batch)
            assert all(v.value == "enqueued" for v in got), got[:3]  # type: ignore[union-attr]

    await asyncio.gather(*(one(b) for b in batches))
    return time.perf_counter() - t0


async def _drain(q: AsyncShardedQueue, jobs: int, concurrency: int) -> float:
    ran = 0
    all_ran = asyncio.Event()

    async def handler(lease: Lease) -> None:
        nonlocal ran
        ran += 1
        if ran == jobs:
            all_ran.set()

    consumer = ShardedConsumer(q, handler, options=ConsumerOptions(
        concurrency=concurrency, beat_ms=20, lease_ms=30_000, maintenance=False))
    t0 = time.perf_counter()
    task = asyncio.create_task(consumer.run())
    await all_ran.wait()
    consumer.stop()  # writes the last completions before run() returns
    await task
    took = time.perf_counter() - t0
    assert (await q.stats()).done == jobs
    return took


def _report(phase: str, n: int, jobs: int, took: float, client_s: float,
            before: list[tuple[float, float, int]], after: list[tuple[float, float, int]],
            per_node: list[int]) -> dict[str, Any]:
    rows = []
    for i, ((c0, u0, k0), (c1, u1, k1), ops) in enumerate(zip(before, after, per_node,
                                                              strict=True)):
        rows.append({"node": i, "ops": ops, "cpu_s": round(c1 - c0, 3),
                     "busy": round((c1 - c0) / took, 2),
                     "cpu_us_per_op": round(1e6 * (c1 - c0) / ops, 1) if ops else None,
                     "script_us_per_op": round((u1 - u0) / ops, 1) if ops else None,
                     "evalsha_calls": k1 - k0})
    used = [r for r in rows if r["ops"]]
    # one core per primary: the busiest node's share times its cost sets the ceiling
    ceiling = min(1e6 / (r["cpu_us_per_op"] * r["ops"] / jobs) for r in used)
    out = {"phase": phase, "shards": n, "jobs": jobs, "seconds": round(took, 3),
           "rate": round(jobs / took), "client_us_per_op": round(1e6 * client_s / jobs, 1),
           "client_busy": round(client_s / took, 2), "nodes": rows,
           "projection_one_core_per_primary": round(ceiling)}
    print(f"{phase:<9} shards={n}: {jobs / took:>9,.0f}/s  client {1e6 * client_s / jobs:5.1f} µs/op "
          f"(busy {client_s / took:.2f})  projection {ceiling:,.0f}/s")
    for r in rows:
        print(f"          node {r['node']}: {r['ops']:>6} ops  busy {r['busy']:.2f}  "
              f"{r['cpu_us_per_op']} µs CPU/op  {r['script_us_per_op']} µs script/op")
    return out


async def run(cluster: LocalCluster, args: argparse.Namespace) -> list[dict[str, Any]]:
    url = "redis+cluster://" + ",".join(f"{h}:{p}" for h, p in cluster.startup_nodes)
    conn = AsyncClusterConnector.from_url(url)
    primaries = [n for n in cluster.nodes if n.role == "primary"]
    results = []
    try:
        for n in args.shards:
            q = AsyncShardedQueue(conn, f"scale-{n}-{os.getpid()}", shards=n)
            owner = [next(i for i, p in enumerate(primaries)
                          if p.port == cluster.primary_for_key(
                              keyspace.queue_key(s.name, "pending")).port) for s in q.shards]
            await q.fence()
            for phase in ("admit", "drain"):
                before, c0 = _snapshot(primaries), time.process_time()
                if phase == "admit":
                    took = await _admit(q, args.jobs, args.inflight)
                else:
                    took = await _drain(q, args.jobs, args.concurrency)
                after, client = _snapshot(primaries), time.process_time() - c0
                per_shard = [(await s.stats()).total for s in q.shards]
                per_node = [sum(c for c, o in zip(per_shard, owner, strict=True) if o == i)
                            for i in range(len(primaries))]
                results.append(_report(phase, n, args.jobs, took, client, before, after,
                                       per_node))
    finally:
        await conn.aclose()
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=40_000)
    parser.add_argument("--shards", type=lambda s: [int(x) for x in s.split(",")],
                        default=[1, 3, 6])
    parser.add_argument("--inflight", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=600)
    parser.add_argument("--replicas", type=int, default=0)
    parser.add_argument("--json", default="", help="write the results to this file")
    args = parser.parse_args()
    load = os.getloadavg()
    print(f"load average before: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} "
          f"({os.cpu_count()} cores)")
    with LocalCluster(primaries=3, replicas_per_primary=args.replicas) as cluster:
        results = asyncio.run(run(cluster, args))
    load = os.getloadavg()
    print(f"load average after: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"load_before_after": [list(os.getloadavg())], "results": results},
                      fh, indent=1)


if __name__ == "__main__":
    main()
