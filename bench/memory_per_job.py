"""Server memory per job, by payload size and state (docs/reliability.md, "Memory limit").

    .venv/bin/python bench/memory_per_job.py [--jobs 20000]

For each payload size a fresh embedded Valkey (no persistence, no limit) admits N jobs
with ``enqueue_many``; ``used_memory`` (``INFO memory``) is read before, with the jobs
pending, with them all leased (active), and once they are all completed (done rows kept
for the retention window, without their payload: decision 0010). Prints bytes per job;
the difference is divided by N, so the server's own baseline cancels out.
"""

from __future__ import annotations

import argparse
import time

from echomq import Connector, Queue, generate, memory_status
from echomq.servers.server import EmbeddedValkey

SIZES = (0, 100, 1024, 4096, 16384)


def used(conn: Connector) -> int:
    time.sleep(0.2)  # let the server settle its client buffers before reading
    return memory_status(conn).used


def measure(size: int, n: int) -> tuple[float, float, float]:
    with EmbeddedValkey(appendonly=False) as server:
        conn = Connector.from_url(server.url)
        q = Queue(conn, "mem")
        payload = b"x" * size
        q.fence()
        base = used(conn)
        for i in range(0, n, 2000):
            q.enqueue_many([(generate("JOB"), payload) for _ in range(min(2000, n - i))])
        pending = used(conn)
        leases = []
        while len(leases) < n:
            leases += q.claim(1000, lease_ms=600_000, window=1000)
        active = used(conn)
        for i in range(0, n, 2000):
            q.complete_many(leases[i : i + 2000])
        done = used(conn)
        conn.close()
    return ((pending - base) / n, (active - base) / n, (done - base) / n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=20_000)
    n = ap.parse_args().jobs
    print(f"bytes of server memory per job, {n:,} jobs per row (Valkey used_memory deltas)")
    print("| payload | pending | active | done (payload dropped) |")
    print("|---:|---:|---:|---:|")
    for size in SIZES:
        p, a, d = measure(size, n)
        print(f"| {size:,} B | {p:,.0f} | {a:,.0f} | {d:,.0f} |", flush=True)


if __name__ == "__main__":
    main()
