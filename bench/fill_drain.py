"""Fill a small server to its maxmemory, then drain it with one consumer (docs/reliability.md).

    .venv/bin/python bench/fill_drain.py [--maxmemory 4mb] [--payload 1024]

Starts an embedded Valkey with ``maxmemory`` under ``noeviction``, admits jobs with
``enqueue_many`` until the first ``ServerFull``, then runs one ``Consumer`` (concurrency
32) on the full queue while a producer retries its refused job. Prints how many jobs fit,
the memory before, at the peak and after the drain, how long the drain took and when the
refused job was admitted again (without the limit being raised).
"""

from __future__ import annotations

import argparse
import asyncio
import time

from echomq import AsyncConnector, AsyncQueue, Verdict, generate, memory_status_async
from echomq.core.errors import ServerFull
from echomq.core.model import Lease
from echomq.runtime.consumer import Consumer, ConsumerOptions
from echomq.servers.server import EmbeddedValkey


async def run(maxmemory: str, size: int) -> None:
    with EmbeddedValkey(extra={"maxmemory": maxmemory, "maxmemory-policy": "noeviction"}) as s:
        conn = AsyncConnector.from_url(s.url)
        q = AsyncQueue(conn, "fill")
        payload = b"x" * size
        await q.fence()
        print("empty:", (await memory_status_async(conn, "fill")).describe())
        admitted = 0
        while True:
            verdicts = await q.enqueue_many([(generate("JOB"), payload) for _ in range(500)])
            admitted += sum(v is Verdict.ENQUEUED for v in verdicts)
            if any(isinstance(v, ServerFull) for v in verdicts):
                break
        print(f"admitted {admitted:,} jobs of {size:,} B;",
              (await memory_status_async(conn, "fill")).describe())
        peak = 0

        async def handler(lease: Lease) -> None:
            return None

        consumer = Consumer(q, handler, options=ConsumerOptions(beat_ms=20, lease_ms=5000))
        task = asyncio.create_task(consumer.run())
        t0 = time.monotonic()
        late, resumed = generate("JOB"), None
        while (await q.stats()).done < admitted + (resumed is not None):
            peak = max(peak, (await memory_status_async(conn, "fill")).counted)
            if resumed is None:
                try:
                    await q.enqueue(late, payload)
                    resumed = time.monotonic() - t0
                except ServerFull:
                    pass
            await asyncio.sleep(0.02)
        drained = time.monotonic() - t0
        after = await memory_status_async(conn, "fill")
        consumer.stop()
        await task
        print(f"drained {admitted + 1:,} jobs in {drained:.2f} s; the refused job was admitted "
              f"after {resumed or 0:.2f} s; peak {peak / 1048576:.1f} MiB; after:", after.describe())
        await conn.aclose()


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--maxmemory", default="4mb")
    ap.add_argument("--payload", type=int, default=1024)
    a = ap.parse_args()
    asyncio.run(run(a.maxmemory, a.payload))


if __name__ == "__main__":
    main()
