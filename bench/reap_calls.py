"""How long one reap call holds the server, for a backlog of expired leases.

    .venv/bin/python bench/reap_calls.py [--jobs 100000]

Admits ``--jobs`` jobs, leases them all for 1 ms, waits for the server clock to pass
every deadline, then reaps the backlog with ``AsyncQueue.reap`` (``reap_batch`` jobs
per call). The server times every call itself (wall time on its own thread), so the
figures are the server's: the mean per call from ``INFO commandstats``, the slowest
calls from ``SLOWLOG``. Compare within one run on a shared machine. The test suite asserts the
behaviour (bounded calls, nothing lost: tests/echomq/test_faults.py); timing lives here.
"""

from __future__ import annotations

import argparse
import asyncio

import redis

from echomq import AsyncConnector, AsyncQueue, generate
from echomq.servers.server import EmbeddedValkey


async def run(url: str, jobs: int) -> None:
    conn = AsyncConnector.from_url(url)
    raw = redis.Redis.from_url(url)
    try:
        q = AsyncQueue(conn, "bench-reap")
        await q.enqueue_many([(generate("JOB"), b"") for _ in range(jobs)])
        leases = []
        while len(leases) < jobs:
            leases += await q.claim(1000, lease_ms=1, window=1000)
        last = max(x.deadline_ms for x in leases)
        while True:
            sec, usec = raw.time()
            if int(sec) * 1000 + int(usec) // 1000 > last:
                break
        # The server's own clock: commandstats for the mean per call, SLOWLOG (calls over
        # 0.5 ms; commands inside a script are logged too, and filtered out) for the tail.
        raw.config_set("slowlog-log-slower-than", 500)
        raw.config_set("slowlog-max-len", 100_000)
        raw.slowlog_reset()
        raw.config_resetstat()
        calls = 0
        while sum(await q.reap()):
            calls += 1
        stat = raw.info("commandstats")["cmdstat_evalsha"]
        slow = sorted(e["duration"] for e in raw.slowlog_get(100_000)
                      if e["command"][:7].upper() == b"EVALSHA")
        print(f"{jobs} expired leases reaped in {calls} calls of at most {q.options.reap_batch} "
              f"(server time): mean {stat['usec_per_call'] / 1000:.2f} ms per call; "
              f"{len(slow)} calls over 0.5 ms, the longest {max(slow, default=0) / 1000:.2f} ms")
    finally:
        raw.close()
        await conn.aclose()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=100_000)
    args = ap.parse_args()
    with EmbeddedValkey(appendonly=False) as server:
        asyncio.run(run(server.url, args.jobs))


if __name__ == "__main__":
    main()
