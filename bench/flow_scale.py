"""1,000 flows of 1-50 children each, drained under kill -9: every parent released exactly once.

    python bench/flow_scale.py [--flows 1000] [--workers 3] [--kill-every 3.0] [--cluster]

An embedded Valkey (``--cluster``: a local 3+3 cluster, the two queues on different
primaries). ``--flows`` flows are admitted, each parent in one of two queues on different
slots, with 1-50 children spread over both (3 % of children fail every attempt and end
dead), each with a random failure policy. Then ``--workers`` consumer processes and one
relay-only process (``tests/echomq/flow_worker_proc.py``: the real runtime; a parent's
handler checks that all its children ended first) drain them, and one of those processes is
killed with SIGKILL and restarted every ``--kill-every`` seconds (0: no kills).

At the end the audit of ``tests/echomq/flow_audit.py`` checks the server's own counts:
every parent released exactly once (its row's ``released``, counted by the release script)
with ``settled`` equal to its child count, or failed by its ``fail`` policy and never
released; no parent ran before all its children ended; no notice left, no parent waiting.
The in-suite version is ``tests/echomq/test_flow_faults.py`` (200 flows, slow).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from tests.echomq.flow_audit import admit_random, audit, ended, states  # noqa: E402
from tests.echomq.test_flows import other_slot  # noqa: E402

from echomq.client._async.cluster import AsyncClusterConnector  # noqa: E402
from echomq.client._async.connector import AsyncConnector  # noqa: E402
from echomq.servers.local_cluster import LocalCluster  # noqa: E402
from echomq.servers.server import EmbeddedValkey  # noqa: E402


def spawn(url: str, a: str, b: str, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "tests.echomq.flow_worker_proc", url, a, b, *extra],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def run(url: str, conn: Any, args: argparse.Namespace) -> None:
    rng = random.Random(args.seed)
    a = f"scale-{rng.randrange(10**6)}"
    b = other_slot(a)
    t0 = time.monotonic()
    parents = await admit_random(conn, rng, args.flows, [a, b])
    admitted_s = time.monotonic() - t0
    procs = [spawn(url, a, b) for _ in range(args.workers)] + [spawn(url, a, b, "--relay-only")]
    kills = 0
    t1 = time.monotonic()

    async def killer() -> None:  # one process killed every kill_every s (0.5-1.5x), restarted
        nonlocal kills
        while args.kill_every:
            await asyncio.sleep(args.kill_every * rng.uniform(0.5, 1.5))
            i = rng.randrange(len(procs))
            procs[i].send_signal(signal.SIGKILL)
            procs[i].wait()
            kills += 1
            procs[i] = spawn(url, a, b, *(["--relay-only"] if i == args.workers else []))

    killing = asyncio.create_task(killer())
    try:
        while not ended(counts := await states(conn, parents)):
            if time.monotonic() - t1 > args.within:
                raise SystemExit(f"not ended within {args.within} s: {dict(counts)}")
            await asyncio.sleep(1.0)
    finally:
        killing.cancel()
        for proc in procs:
            proc.kill()
            proc.wait()
    drained_s = time.monotonic() - t1
    result = await audit(conn, parents, [a, b], a)
    load = os.getloadavg()
    print(f"{'cluster 3+3' if args.cluster else 'one server'}: {result.line()}; "
          f"{kills} processes killed with SIGKILL; admitted in {admitted_s:.1f} s, drained in "
          f"{drained_s:.1f} s by {args.workers} consumer processes + 1 relay; "
          f"load average {load[0]:.2f}")
    if result.doubles or result.early or result.released + result.failed != result.flows:
        raise SystemExit("AUDIT FAILED")


async def main(args: argparse.Namespace) -> None:
    if args.cluster:
        with LocalCluster(primaries=3, replicas_per_primary=1, node_timeout_ms=2000) as cluster:
            url = "redis+cluster://" + ",".join(f"{h}:{p}" for h, p in cluster.startup_nodes)
            conn: Any = AsyncClusterConnector.from_url(url)
            try:
                await run(url, conn, args)
            finally:
                await conn.aclose()
    else:
        with EmbeddedValkey(appendonly=False) as server:
            conn = AsyncConnector.from_url(server.url)
            try:
                await run(server.url, conn, args)
            finally:
                await conn.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--flows", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--kill-every", type=float, default=3.0, help="seconds; 0: no kills")
    parser.add_argument("--within", type=float, default=900.0)
    parser.add_argument("--seed", type=int, default=27)
    parser.add_argument("--cluster", action="store_true")
    asyncio.run(main(parser.parse_args()))
