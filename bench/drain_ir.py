"""Instructions of the server per job while a default Consumer drains a backlog (issue 30).

    .venv/bin/python bench/drain_ir.py [--jobs 8192] [--concurrency 32] [--annotate N]

``bench/transition_ir.py`` replays the scripts as a model of the consumer's flushes; this
runs the consumer itself against the wheel's ``valkey-server`` under callgrind
(``bench/callgrind.py``): N jobs admitted (64-byte payloads), the counters zeroed, then a
Consumer (blocking no-op handler) drains them, and the counters are dumped when its own
stats say all N completed (no server call polls meanwhile). Prints the whole server's
instructions per job: every flush (complete, claim, peek), the consumer's other calls
(beats, fence) and the protocol. The server is ~50x slower under valgrind, so the worker
is never the wall: both flushes are in flight as under a deep backlog. ``PYTHONPATH`` picks
the package measured.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from callgrind import CallgrindValkey
from echomq import AsyncConnector, AsyncQueue, Consumer, ConsumerOptions, Lease, generate_many


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=8192)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--annotate", type=int, default=0, help="print the top N functions (inclusive Ir/job)")
    a = ap.parse_args()
    n = a.jobs
    srv = CallgrindValkey("drain_ir")
    with srv:
        srv.wait_ready()

        async def drain() -> None:
            q = AsyncQueue(AsyncConnector.from_url(srv.url), "drain")
            await q.fence()
            await q.enqueue_many([(i, b"x" * 64) for i in generate_many("JOB", n)])
            await asyncio.sleep(0.3)
            srv.ctl("-z")

            def handler(lease: Lease) -> None:
                return None

            consumer = Consumer(q, handler, options=ConsumerOptions(concurrency=a.concurrency))
            task = asyncio.create_task(consumer.run())
            while consumer.stats.completed < n:  # noqa: ASYNC110 (its own count: no server call)
                await asyncio.sleep(0.05)
            srv.ctl("-d")
            consumer.stop()
            await task
            await q.connector.aclose()

        asyncio.run(drain())
        time.sleep(0.5)
        print(f"{n} jobs, concurrency {a.concurrency}: {srv.total() / n:,.0f} Ir/job "
              "(the whole server while a Consumer drains them)")
        if a.annotate:
            print(srv.annotate(a.annotate, n))


if __name__ == "__main__":
    main()
