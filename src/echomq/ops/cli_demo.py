"""``echomq demo``: admit a batch on an embedded Valkey (or ``ECHOMQ_URL``), print the
verdicts and rates, then drain it with one consumer. Registered on the ``echomq`` group
through its ``lazy`` table (:mod:`echomq.ops.cli`): loaded only when the verb runs."""

from __future__ import annotations

import asyncio
import collections
import time

import click
from rich.table import Table

from echomq.client._async.connector import AsyncConnector
from echomq.client._async.queue import AsyncQueue
from echomq.core.ids import generate
from echomq.core.model import Lease, Verdict
from echomq.ops.cli import console
from echomq.runtime.consumer import Consumer, ConsumerOptions
from echomq.servers.server import EmbeddedValkey, server_url_from_env

__all__ = ["demo"]


@click.command()
@click.option("--jobs", default=50_000, show_default=True, help="jobs to admit and drain")
@click.option("--queue", "name", default="demo", show_default=True)
def demo(jobs: int, name: str) -> None:
    """Admit a batch on an embedded Valkey (or ECHOMQ_URL), print verdicts and rates, drain it."""
    server = None if server_url_from_env() else EmbeddedValkey().start()
    url = server.url if server else str(server_url_from_env())
    try:
        asyncio.run(_demo(url, jobs, name, embedded=server is not None))
    finally:
        if server is not None:
            server.cleanup()


async def _demo(url: str, jobs: int, name: str, *, embedded: bool) -> None:
    console.print(f"[bold]EchoMQ demo[/] on {'embedded valkey-server at ' if embedded else ''}{url}")
    conn = AsyncConnector.from_url(url)
    try:
        q = AsyncQueue(conn, name)
        items = [(generate("JOB"), b"job %d" % i) for i in range(jobs)]
        items += [items[0], items[len(items) // 2], items[-1]]  # three duplicates
        items.insert(len(items) // 3, (generate("ORD"), b"not a job"))  # a wrong-kind id
        t0 = time.perf_counter()
        verdicts = await q.enqueue_many(items)
        admit_s = time.perf_counter() - t0
        counts = collections.Counter(v.value if isinstance(v, Verdict) else type(v).__name__
                                     for v in verdicts)
        table = Table(title=f"enqueue_many of {len(items)} items")
        table.add_column("verdict")
        table.add_column("count", justify="right")
        for verdict, n in sorted(counts.items()):
            table.add_row(verdict, str(n))
        console.print(table)
        console.print(f"admission: {len(items) / admit_s:,.0f} items/s ({admit_s:.2f} s)")

        done = asyncio.Event()
        seen = 0

        def handler(lease: Lease) -> None:
            nonlocal seen
            seen += 1
            if seen >= counts["enqueued"]:
                done.set()

        consumer = Consumer(q, handler, options=ConsumerOptions(concurrency=256))
        t0 = time.perf_counter()
        task = asyncio.create_task(consumer.run())
        await done.wait()
        drain_s = time.perf_counter() - t0
        consumer.stop()
        await task
        stats = await q.stats()
        console.print(f"drain: {seen / drain_s:,.0f} jobs/s by one consumer ({drain_s:.2f} s); "
                      f"queue now: pending={stats.pending} active={stats.active} done={stats.done}")
    finally:
        await conn.aclose()
