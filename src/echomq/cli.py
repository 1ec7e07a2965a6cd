"""The ``echomq`` command line: a demo on an embedded server, and queue inspection.

    echomq demo [--jobs N]        admit a batch (with duplicates and a wrong-kind id),
                                  print the verdicts and rates, then drain it
    echomq stats QUEUE            counts per state          (--url, else ECHOMQ_URL)
    echomq browse QUEUE STATE     a page of jobs in a state
    echomq requeue-dead QUEUE     dead jobs back to pending
    echomq purge-dead QUEUE       delete dead jobs
    echomq dashboard              the web dashboard (--url, --port, --token, --read-only)
"""

from __future__ import annotations

import asyncio
import collections
import time

import click
from rich.console import Console
from rich.table import Table

from echomq import AsyncConnector, AsyncQueue, Connector, EchoMQError, Lease, Queue, Verdict, generate
from echomq.consumer import Consumer, ConsumerOptions
from echomq.server import EmbeddedValkey, server_url_from_env

console = Console()


@click.group()
def main() -> None:
    """EchoMQ: an atomic, Lua-first job queue on Valkey."""


@main.command()
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


def _queue(url: str | None, name: str) -> Queue:
    url = url or server_url_from_env()
    if not url:
        raise click.UsageError("give --url or set ECHOMQ_URL")
    return Queue(Connector.from_url(url), name)


@main.command()
@click.argument("queue")
@click.option("--url", default=None, help="server URL (default: ECHOMQ_URL)")
def stats(queue: str, url: str | None) -> None:
    """Counts of QUEUE's jobs in each state."""
    s = _queue(url, queue).stats()
    console.print(f"pending={s.pending} active={s.active} delayed={s.delayed} "
                  f"done={s.done} dead={s.dead}")


@main.command()
@click.argument("queue")
@click.argument("state", type=click.Choice(["pending", "active", "delayed", "done", "dead"]))
@click.option("--url", default=None)
@click.option("--limit", default=20, show_default=True)
def browse(queue: str, state: str, url: str | None, limit: int) -> None:
    """A page of QUEUE's jobs in STATE, with their rows."""
    table = Table(title=f"{queue}: {state}")
    for col in ("id", "score", "attempts", "error", "payload"):
        table.add_column(col)
    for v in _queue(url, queue).browse(state, limit=limit):
        table.add_row(v.id, f"{v.score:.0f}", str(v.attempts),
                      v.row.get("error", b"").decode(errors="replace"),
                      repr(v.row.get("payload", b"")[:40]))
    console.print(table)


@main.command("requeue-dead")
@click.argument("queue")
@click.option("--url", default=None)
def requeue_dead(queue: str, url: str | None) -> None:
    """Put QUEUE's dead jobs back on pending."""
    console.print(f"requeued {_queue(url, queue).requeue_dead()}")


@main.command("purge-dead")
@click.argument("queue")
@click.option("--url", default=None)
def purge_dead(queue: str, url: str | None) -> None:
    """Delete QUEUE's dead jobs."""
    console.print(f"purged {_queue(url, queue).purge_dead()}")


@main.command()
@click.option("--url", default=None, help="server URL (default: ECHOMQ_URL)")
@click.option("--host", default="127.0.0.1", show_default=True, help="address to listen on")
@click.option("--port", default=8700, show_default=True, type=click.IntRange(1, 65535))
@click.option("--token", envvar="ECHOMQ_DASHBOARD_TOKEN", default=None,
              help="secret that allows actions (default: ECHOMQ_DASHBOARD_TOKEN; none: read-only)")
@click.option("--read-only", is_flag=True, help="refuse every action, even with the token")
def dashboard(url: str | None, host: str, port: int, token: str | None, read_only: bool) -> None:
    """Serve the web dashboard: queues, jobs, charts, actions on dead and waiting jobs."""
    try:
        from echomq.dashboard import DashboardOptions
        from echomq.dashboard.app import serve
    except ImportError as exc:
        raise click.ClickException(f"the dashboard needs its extra: pip install 'echomq[dashboard]' ({exc})"
                                   ) from None
    url = url or server_url_from_env()
    if not url:
        raise click.UsageError("give --url or set ECHOMQ_URL")
    try:
        options = DashboardOptions(token=token or None, read_only=read_only)
        serve(url, host=host, port=port, options=options)
    except (ValueError, OSError, EchoMQError) as exc:
        raise click.ClickException(str(exc)) from None
