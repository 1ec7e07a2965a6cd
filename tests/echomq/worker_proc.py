"""A consumer in its own process, for tests that kill or pause one.

    python -m tests.echomq.worker_proc URL QUEUE --sleep S --beat MS --lease MS

Each handler call appends ``start <id> <attempt> <pid>`` to the list ``testlog:<QUEUE>``
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

import redis.asyncio as aredis

from echomq import AsyncConnector, AsyncQueue, Lease
from echomq.consumer import Consumer, ConsumerOptions


async def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("queue")
    p.add_argument("--sleep", type=float, default=0.0)
    p.add_argument("--beat", type=int, default=100)
    p.add_argument("--lease", type=int, default=1000)
    p.add_argument("--concurrency", type=int, default=8)
    a = p.parse_args()
    log = aredis.Redis.from_url(a.url)
    conn = AsyncConnector.from_url(a.url, retry_budget_s=30)
    pid = os.getpid()

    async def handler(lease: Lease) -> None:
        await log.rpush(f"testlog:{a.queue}", f"start {lease.id} {lease.attempt} {pid}")
        if a.sleep:
            await asyncio.sleep(a.sleep)

    consumer = Consumer(AsyncQueue(conn, a.queue), handler,
                        options=ConsumerOptions(beat_ms=a.beat, lease_ms=a.lease,
                                                concurrency=a.concurrency, grace_s=1.0))
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, consumer.stop)
    await log.rpush(f"testlog:{a.queue}", f"ready {pid}")
    await consumer.run()
    print(json.dumps(dataclasses.asdict(consumer.stats)), flush=True)
    await conn.aclose()
    await log.aclose()


if __name__ == "__main__":
    asyncio.run(main())
