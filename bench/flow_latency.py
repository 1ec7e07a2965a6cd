"""Release latency of a flow's parent after its last child, same slot and across slots.

    python bench/flow_latency.py [--flows 300] [--children 4] [--rate 20] [--beat-ms 100] [--cluster]

An embedded Valkey (``--cluster``: a local 3+3 cluster, the children's queue on another
primary than the parent's), and one worker (``echomq.ops.worker.Worker``, as ``echomq
worker`` runs it: one consumer per queue, each relaying its queue's notices every beat).
``--flows`` flows of ``--children`` children each are admitted at ``--rate`` flows per
second, in two runs: **same slot** (the children in the parent's queue) and **across
slots** (the children in a queue of another slot). The latency of one flow is from the
moment its last child was completed (the child's finish time in the done set, the
server's clock) to the moment its parent was claimed (its lease deadline less the lease,
the server's clock): relay, release and claim together, what a user waits between the
last child and the parent starting. Both ends are server times; on the local cluster the
primaries share this machine's clock.

What bounds it: across slots, a notice waits for its queue's next upkeep beat
(``beat_ms``), then the released parent wakes a claimer at once (its wake message). So p50
is half a beat and p99 a beat, plus the beat's own work, the settle and the claim
(measured: ~0.7 and ~1.3 beats at the default). In the same slot the child's own script
releases the parent (no notice, no relay: decision 0041), so only the wake and the claim
remain (measured: 2 ms p50, 18 ms p99, against 73 and 190 ms through the relay before;
figures in docs/decisions/0041). The load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from echomq import Ack, AsyncQueue, Lease, generate  # noqa: E402
from echomq.client._async.cluster import AsyncClusterConnector  # noqa: E402
from echomq.client._async.connector import AsyncConnector  # noqa: E402
from echomq.ops.worker import Worker, WorkerSettings  # noqa: E402
from echomq.protocol.keyspace import slot  # noqa: E402
from echomq.servers.local_cluster import LocalCluster  # noqa: E402
from echomq.servers.server import EmbeddedValkey  # noqa: E402

LEASE_MS = 10_000


def other_slot(name: str) -> str:
    third = slot("emq:{" + name + "}:x") * 3 // 16384
    return next(n for i in range(100) if (n := f"{name}-b{i}")
                and slot("emq:{" + n + "}:x") * 3 // 16384 != third)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


async def one_run(conn: Any, mode: str, args: argparse.Namespace) -> list[float]:
    parent_q = f"lat-{mode}-{generate('JOB')[-6:].lower()}"
    child_q = parent_q if mode == "same" else other_slot(parent_q)
    pq, cq = AsyncQueue(conn, parent_q), AsyncQueue(conn, child_q)
    claimed: dict[str, int] = {}
    flows: dict[str, list[str]] = {}
    all_claimed = asyncio.Event()

    async def child(lease: Lease) -> Ack:
        return Ack(result=b"r")

    async def parent(lease: Lease) -> Ack:
        claimed[lease.id] = lease.deadline_ms - LEASE_MS  # the claim, on the server's clock
        if len(claimed) == args.flows:
            all_claimed.set()
        return Ack(result=b"p")

    async def both(lease: Lease) -> Ack:
        return await (parent(lease) if lease.id in flows else child(lease))

    handlers = {parent_q: both} if mode == "same" else {parent_q: parent, child_q: child}
    worker = Worker(WorkerSettings(handlers=handlers, beat_ms=args.beat_ms, lease_ms=LEASE_MS),
                    connector=conn)
    run = asyncio.create_task(worker.run())
    try:
        gap = 1.0 / args.rate
        start = time.perf_counter()
        for i in range(args.flows):
            pid = generate("JOB")
            kids = [(child_q, generate("JOB"), b"c") for _ in range(args.children)]
            flows[pid] = [k[1] for k in kids]
            await pq.admit_flow(parent=(pid, b"p"), children=kids)
            await asyncio.sleep(max(0.0, start + (i + 1) * gap - time.perf_counter()))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(all_claimed.wait(), 120)
    finally:
        worker.stop()
        await run
    latencies = []
    for pid, kids in flows.items():
        finished = [await conn.command("ZSCORE", cq.keys["done"], k) for k in kids]
        if pid not in claimed or None in finished:
            continue
        latencies.append(claimed[pid] - max(float(x) for x in finished))
    print(f"  {mode:5} slot: {len(latencies)}/{args.flows} flows measured", flush=True)
    return latencies


async def main(args: argparse.Namespace) -> None:
    if args.cluster:
        ctx: Any = LocalCluster(primaries=3, replicas_per_primary=1, node_timeout_ms=2000)
    else:
        ctx = EmbeddedValkey(appendonly=False)
    with ctx as server:
        if args.cluster:
            nodes = ",".join(f"{h}:{p}" for h, p in server.startup_nodes)
            conn: Any = AsyncClusterConnector.from_url("redis+cluster://" + nodes)
        else:
            conn = AsyncConnector.from_url(server.url)
        try:
            results = {mode: await one_run(conn, mode, args) for mode in ("same", "cross")}
        finally:
            await conn.aclose()
    load = os.getloadavg()
    print(f"\n{'cluster 3+3' if args.cluster else 'one server'}; {args.flows} flows of "
          f"{args.children} children at {args.rate}/s; beat_ms={args.beat_ms}; "
          f"load average {load[0]:.2f} {load[1]:.2f}")
    print(f"{'children':>14}  {'p50 ms':>7}  {'p99 ms':>7}  {'max ms':>7}  {'mean ms':>7}")
    for mode, values in results.items():
        label = "same slot" if mode == "same" else "across slots"
        print(f"{label:>14}  {pct(values, 50):7.1f}  {pct(values, 99):7.1f}  {max(values):7.1f}  "
              f"{statistics.mean(values):7.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--flows", type=int, default=300)
    parser.add_argument("--children", type=int, default=4)
    parser.add_argument("--rate", type=float, default=20.0, help="flows admitted per second")
    parser.add_argument("--beat-ms", type=int, default=100)
    parser.add_argument("--cluster", action="store_true")
    asyncio.run(main(parser.parse_args()))
