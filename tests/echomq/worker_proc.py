"""A consumer in its own process, for tests that kill or pause one.

    python -m tests.echomq.worker_proc URL QUEUE --sleep S --beat MS --lease MS

URL is a single server or a cluster (``redis+cluster://...``).

Each handler call appends ``start <id> <attempt> <pid> <deadline>`` to the list ``testlog:{QUEUE}``
(outside the queue's keyspace), sleeps S seconds, then answers ack. On SIGTERM it
stops gracefully and prints its ConsumerStats as one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import signal

from echomq import AsyncQueue, Lease, connect_async
from echomq.runtime.consumer import Consumer, ConsumerOptions


async def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("queue")
    p.add_argument("--sleep", type=float, default=0.0)
    p.add_argument("--beat", type=int, default=100)
    p.add_argument("--lease", type=int, default=1000)
    p.add_argument("--concurrency", type=int, default=8)
    a = p.parse_args()
    conn = connect_async(a.url, retry_budget_s=30)  # a single server or a cluster
    pid = os.getpid()
    key = f"testlog:{{{a.queue}}}"  # the queue's hash tag: on the queue's node of a cluster

    async def handler(lease: Lease) -> None:
        await conn.command("RPUSH", key, f"start {lease.id} {lease.attempt} {pid} {lease.deadline_ms}")
        if a.sleep:
            await asyncio.sleep(a.sleep)

    consumer = Consumer(AsyncQueue(conn, a.queue), handler,
                        options=ConsumerOptions(beat_ms=a.beat, lease_ms=a.lease,
                                                concurrency=a.concurrency, grace_s=1.0))
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, consumer.stop)
    await conn.command("RPUSH", key, f"ready {pid}")
    await consumer.run()
    print(json.dumps(dataclasses.asdict(consumer.stats)), flush=True)
    await conn.aclose()


if __name__ == "__main__":
    asyncio.run(main())
