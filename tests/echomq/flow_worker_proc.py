"""Consumers of two queues in one process, for the flow fault test (tests/echomq/test_flow_faults.py).

    python -m tests.echomq.flow_worker_proc URL QUEUE_A QUEUE_B [--relay-only]

Each consumer runs the real runtime (claims, completions, upkeep: promote, reap, the flow
relay and repair). The handler fails a job whose payload is ``F`` (three attempts, 20 ms
back-off: then it is dead); for a parent (payload ``P``) it first checks that every child
has ended and appends ``early <id>`` to ``testlog:{QUEUE_A}`` if one has not. With
``--relay-only`` the process only relays the notices of both queues, in a loop. The test
kills these processes with SIGKILL at random moments.
"""

from __future__ import annotations

import argparse
import asyncio

from echomq import AsyncQueue, Lease, QueueOptions, connect_async
from echomq.core.outcomes import BackoffPolicy
from echomq.runtime.consumer import Consumer, ConsumerOptions

ENDED = {"done", "dead", "cancelled"}


async def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--relay-only", action="store_true")
    args = p.parse_args()
    conn = connect_async(args.url, retry_budget_s=30)
    log = f"testlog:{{{args.a}}}"
    queues = [AsyncQueue(conn, n, options=QueueOptions(max_attempts=3)) for n in (args.a, args.b)]
    await conn.command("RPUSH", log, "ready")
    if args.relay_only:
        while True:
            for q in queues:
                await q.flows.relay(q.name)
            await asyncio.sleep(0.005)

    def handler_of(q: AsyncQueue):  # type: ignore[no-untyped-def]
        async def handler(lease: Lease) -> bytes:
            if lease.payload == b"F":
                raise RuntimeError("a child that fails")
            if lease.payload == b"P":
                kids = await q.children(lease.id)
                if not kids or any(k.state not in ENDED for k in kids):
                    await conn.command("RPUSH", log, f"early {lease.id}")
            return b"r:" + lease.id.encode()
        return handler

    options = ConsumerOptions(beat_ms=50, lease_ms=1500, concurrency=16, grace_s=1.0,
                              backoff=BackoffPolicy(base_ms=20, factor=1.0, max_ms=20))
    await asyncio.gather(*(Consumer(q, handler_of(q), options=options).run() for q in queues))


if __name__ == "__main__":
    asyncio.run(main())
