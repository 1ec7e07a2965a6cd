"""A queue consumer in its own process, for the chaos run to kill, pause and restart.

    python -m codemojex.chaos.worker URL QUEUE LOG [--cluster] [--lease MS] [--beat MS]

Every handler call appends ``S <id> <attempt>`` to the line-buffered file ``LOG`` and,
once the work is done, ``E <id> <attempt>``; every fenced completion answer is logged
as ``C <id> <attempt> completed|stale``. A line reaches the kernel before the next
step, so a kill -9 loses at most the line being written. A payload ``slow`` takes 0.3-1 s; ``poison`` makes
the handler fail every attempt (the job ends dead with its error). On SIGTERM the consumer stops
gracefully and writes ``T <stats as JSON>``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import random
import signal
from collections.abc import Sequence
from typing import IO, Any

from echomq import (
    AsyncClusterConnector,
    AsyncConnector,
    AsyncQueue,
    Backoff,
    Claimed,
    Completion,
    Consumer,
    ConsumerOptions,
    Lease,
)

__all__ = ["LoggingQueue", "main"]


class LoggingQueue(AsyncQueue):
    """An AsyncQueue that writes every completion verdict to a log before handing it back."""

    log: IO[str]

    def _note(self, leases: Sequence[Lease], verdicts: Sequence[Completion]) -> None:
        for lease, verdict in zip(leases, verdicts, strict=True):
            self.log.write(f"C {lease.id} {lease.attempt} {verdict.value}\n")

    async def settle(
        self, finished: Sequence[tuple[Lease, bytes]], *, count: int, lease_ms: int,
        candidates: Sequence[bytes], window: int,
    ) -> tuple[list[Completion], Claimed, list[bytes]]:
        done, leases, cands = await super().settle(
            finished, count=count, lease_ms=lease_ms, candidates=candidates, window=window)
        self._note([x for x, _ in finished], done)
        return done, leases, cands

    async def complete_many(
        self, leases: Sequence[Lease], results: Sequence[bytes] | None = None
    ) -> list[Completion]:
        done = await super().complete_many(leases, results)
        self._note(leases, done)
        return done


async def run(a: argparse.Namespace) -> None:
    conn: Any = (AsyncClusterConnector if a.cluster else AsyncConnector).from_url(
        a.url, retry_budget_s=30)
    log = open(a.log, "a", buffering=1, encoding="ascii")  # noqa: SIM115, ASYNC230 (lives as long as the process)
    queue = LoggingQueue(conn, a.queue)
    queue.log = log

    async def handler(lease: Lease) -> Backoff | None:
        log.write(f"S {lease.id} {lease.attempt}\n")
        if lease.payload == b"poison":
            return Backoff(error="poison pill", delay_ms=20)
        slow = lease.payload == b"slow"  # a long job: a fault almost always finds one running
        await asyncio.sleep(random.uniform(0.3, 1.0) if slow else random.random() * a.work_ms / 1000)
        log.write(f"E {lease.id} {lease.attempt}\n")
        return None

    consumer = Consumer(queue, handler, options=ConsumerOptions(
        beat_ms=a.beat, lease_ms=a.lease, concurrency=a.concurrency, grace_s=1.0))
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, consumer.stop)
    log.write(f"R {os.getpid()}\n")
    try:
        await consumer.run()
        log.write(f"T {json.dumps(dataclasses.asdict(consumer.stats))}\n")
    finally:
        await conn.aclose()
        log.close()


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="codemojex.chaos.worker")
    p.add_argument("url")
    p.add_argument("queue")
    p.add_argument("log")
    p.add_argument("--cluster", action="store_true")
    p.add_argument("--beat", type=int, default=100)
    p.add_argument("--lease", type=int, default=2000)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--work-ms", type=float, default=10.0)
    asyncio.run(run(p.parse_args(argv)))


if __name__ == "__main__":
    main()
