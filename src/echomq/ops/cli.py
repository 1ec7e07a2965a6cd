"""The ``echomq`` command line: a demo on an embedded server, and queue inspection.

    echomq demo [--jobs N]        admit a batch (with duplicates and a wrong-kind id),
                                  print the verdicts and rates, then drain it
    echomq info [QUEUE...]        every queue: counts, rates, oldest pending, workers (--json)
    echomq stats QUEUE            counts per state          (--url, else ECHOMQ_URL)
    echomq browse QUEUE STATE     a page of jobs in a state
    echomq requeue-dead QUEUE     dead jobs back to pending
    echomq purge-dead QUEUE       delete dead jobs
    echomq reshard QUEUE --to N   move a sharded queue to N shards while it runs
    echomq dashboard              the web dashboard (--url, --port, --token, --read-only)
    echomq schedule TARGET        admit the ticks of periodic jobs (module:SCHEDULES), --once
    echomq result QUEUE ID        wait for a job to end, print its result (echomq.ops.cli_jobs)
    echomq progress QUEUE ID      a job's state and last progress report
    echomq cancel QUEUE ID...     cancel waiting jobs, ask running ones to stop
    echomq search QUEUE           find jobs by state, lane, error, time, id prefix (cursor pages)
    echomq relay --database-url   committed outbox rows onto their queues (echomq.ops.cli_relay)
    echomq flow QUEUE ID          a flow as a tree, each node's state (echomq.ops.cli_flow)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from importlib import metadata
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from echomq.ops.clikit import Group, short_connector
from echomq.protocol import keyspace
from echomq.protocol.sharding import MAX_SHARDS
from echomq.servers.server import server_url_from_env

if TYPE_CHECKING:
    from rich.console import Console

    from echomq.client._async.queue import AsyncQueue
    from echomq.client._async.sharded import AsyncShardedQueue
    from echomq.client.info import ServerInfo
    from echomq.core.model import JobView, Stats

# What a verb needs beyond click (redis-py, asyncio, rich, the consumer, the dashboard)
# is imported inside that verb: ``import echomq.ops.cli`` stays light, so a command refused
# for its arguments answers at once however loaded the machine is (test_cli_import.py).

__all__ = ["main"]

T = TypeVar("T")


class _Console:
    """rich's Console, made on first use (rich takes ~0.1 s to import)."""

    _real: Console | None = None

    def __getattr__(self, name: str) -> Any:
        if self._real is None:
            from rich.console import Console

            self._real = Console()
        return getattr(self._real, name)


console = cast("Console", _Console())


def _version() -> str:
    try:
        return metadata.version("echomq")
    except metadata.PackageNotFoundError:
        return "unknown"


class _Commands(Group):
    """The ``echomq`` group. A verb module of its own (it imports this module for ``main``
    and the helpers below) is listed in ``lazy`` as ``"name": "module:attribute"`` rather
    than imported here: it is loaded when its verb runs, and no import circle forms."""

    lazy = {"demo": "echomq.ops.cli_demo:demo", "pause": "echomq.ops.cli_gate:pause",  # noqa: RUF012
            "resume": "echomq.ops.cli_gate:resume", "limit": "echomq.ops.cli_gate:limit",
            "result": "echomq.ops.cli_jobs:result", "progress": "echomq.ops.cli_jobs:progress",
            "cancel": "echomq.ops.cli_jobs:cancel", "relay": "echomq.ops.cli_relay:relay",
            "search": "echomq.ops.cli_search:search", "flow": "echomq.ops.cli_flow:flow"}


@click.group(cls=_Commands, name="echomq")
@click.version_option(_version(), prog_name="echomq")
def main() -> None:
    """EchoMQ: an atomic, Lua-first job queue on Valkey."""


def _url(url: str | None) -> str:
    url = url or server_url_from_env()
    if not url:
        raise click.UsageError("give --url or set ECHOMQ_URL")
    return url


def _run_on(url: str | None, action: Callable[[Any], Awaitable[T]]) -> T:
    """Run ``action(connector)`` on a short-budget connector to ``url`` and close it."""
    import asyncio

    connector = short_connector(_url(url))

    async def go() -> T:
        try:
            return await action(connector)
        finally:
            await connector.aclose()

    return asyncio.run(go())


async def _checked(connector: Any, queue: str) -> AsyncQueue | AsyncShardedQueue:
    """The queue named ``queue`` (a sharded one as one queue); QueueNotFound (one line)
    for a name never written."""
    from echomq.client.info import queue_info
    from echomq.client.logical import open_queue

    await queue_info(connector, keyspace.check_queue(queue))  # raises QueueNotFound
    return await open_queue(connector, queue)


URL = click.option("--url", default=None, help="server URL (default: ECHOMQ_URL)")


@main.command()
@click.argument("queue")
@URL
def stats(queue: str, url: str | None) -> None:
    """Counts of QUEUE's jobs in each state."""
    queue = keyspace.check_queue(queue)  # a bad name: one line, before anything is loaded

    async def go(connector: Any) -> Stats:
        return await (await _checked(connector, queue)).stats()

    s = _run_on(url, go)
    console.print(f"pending={s.pending} active={s.active} delayed={s.delayed} "
                  f"done={s.done} dead={s.dead} expired={s.expired}")


@main.command()
@click.argument("queue")
@click.argument("state", type=click.Choice(list(keyspace.STATES)))
@URL
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 10_000))
def browse(queue: str, state: str, url: str | None, limit: int) -> None:
    """A page of QUEUE's jobs in STATE, with their rows."""
    from rich.table import Table

    queue = keyspace.check_queue(queue)  # a bad name: one line, before anything is loaded

    async def go(connector: Any) -> list[JobView]:
        return await (await _checked(connector, queue)).browse(state, limit=limit)

    table = Table(title=f"{queue}: {state}")
    for col in ("id", "score", "attempts", "error", "payload"):
        table.add_column(col)
    for v in _run_on(url, go):
        error = v.row.get("error", b"").decode(errors="replace")
        table.add_row(v.id, f"{v.score:.0f}", str(v.attempts), error.splitlines()[0] if error else "",
                      repr(v.row.get("payload", b"")[:40]))
    console.print(table)


@main.command("requeue-dead")
@click.argument("queue")
@URL
def requeue_dead(queue: str, url: str | None) -> None:
    """Put QUEUE's dead jobs back on pending."""
    queue = keyspace.check_queue(queue)  # a bad name: one line, before anything is loaded

    async def go(connector: Any) -> int:
        return await (await _checked(connector, queue)).requeue_dead()

    console.print(f"requeued {_run_on(url, go)}")


@main.command("purge-dead")
@click.argument("queue")
@URL
def purge_dead(queue: str, url: str | None) -> None:
    """Delete QUEUE's dead jobs."""
    queue = keyspace.check_queue(queue)  # a bad name: one line, before anything is loaded

    async def go(connector: Any) -> int:
        return await (await _checked(connector, queue)).purge_dead()

    console.print(f"purged {_run_on(url, go)}")


@main.command()
@click.argument("queue")
@click.option("--to", "to", required=True, type=click.IntRange(1, MAX_SHARDS),
              help="the new shard count")
@URL
def reshard(queue: str, to: int, url: str | None) -> None:
    """Move the sharded QUEUE to --to shards while it runs (decision 0032): every job
    moves along, finished rows keep their results and dedupe window."""
    queue = keyspace.check_queue(queue)  # a bad name: one line, before anything is loaded

    async def go(connector: Any) -> int:
        from echomq.client._async.reshard import reshard as reshard_async

        return await reshard_async(connector, queue, to=to)

    console.print(f"{queue}: {_run_on(url, go)} shards -> {to}")


@main.command()
@click.argument("queues", nargs=-1)
@URL
@click.option("--json", "as_json", is_flag=True, help="print JSON instead of tables")
def info(queues: tuple[str, ...], url: str | None, as_json: bool) -> None:
    """Every queue on the server (or the QUEUES named): counts, rates, age, workers."""
    names = [keyspace.check_queue(q) for q in queues] or None

    async def go(connector: Any) -> ServerInfo:
        from echomq.client.info import server_info

        return await server_info(connector, names)

    found = _run_on(url, go)
    if as_json:
        click.echo(found.to_json())
    else:
        from echomq.ops.info_view import render_info

        render_info(found, console)


@main.command()
@click.argument("target")
@click.option("-q", "--queue", "queues", multiple=True, help="a queue to serve (repeat for several)")
@click.option("-c", "--concurrency", type=click.IntRange(1, 100_000), default=None,
              help="jobs in flight per queue [32]")
@click.option("--burst", is_flag=True, default=None, help="exit once the queues are empty")
@URL
@click.option("--grace", "grace_s", type=click.FloatRange(0, 86_400), default=None,
              help="seconds in-flight jobs get to finish at shutdown before they are handed back [10]")
@click.option("--lease-ms", type=click.IntRange(1, None), default=None, help="lease length [10000]")
@click.option("--metrics-port", type=click.IntRange(0, 65_535), default=None,
              help="serve Prometheus metrics on 127.0.0.1:PORT/metrics (0: any free port)")
@click.option("--allow-eviction", is_flag=True, default=None,
              help="run even if the server's maxmemory-policy could evict jobs (warns)")
@click.option("--pool", type=click.Choice(["thread", "process"]), default=None,
              help="where a blocking handler runs: a thread, or a child process that a timeout "
                   "kills [thread]")
@click.option("--timeout-ms", type=click.IntRange(1, None), default=None,
              help="a handler running longer fails its attempt [no limit]")
@click.option("-v", "--verbose", is_flag=True, help="log at INFO")
def worker(target: str, queues: tuple[str, ...], concurrency: int | None, burst: bool | None,
           url: str | None, grace_s: float | None, lease_ms: int | None, metrics_port: int | None,
           allow_eviction: bool | None, pool: str | None, timeout_ms: int | None,
           verbose: bool) -> None:
    """Run TARGET (package.module:handler with --queue, package.module:WorkerSettings, or
    package.module:app, a typed-task App: every queue of its tasks, or the --queue ones).

    SIGTERM or SIGINT: stop claiming, let running jobs finish within the grace period,
    hand the rest back at once, exit 0 (a second signal: hand back now).
    """
    import asyncio
    import logging

    from echomq.ops.worker import load_target, run_worker, settings_for

    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = settings_for(load_target(target), queues=[keyspace.check_queue(q) for q in queues],
                            concurrency=concurrency, burst=burst, url=url or server_url_from_env(),
                            grace_s=grace_s, lease_ms=lease_ms, metrics_port=metrics_port,
                            allow_eviction=allow_eviction, pool=pool, timeout_ms=timeout_ms)
    if settings.url is None:
        raise click.UsageError("give --url or set ECHOMQ_URL")
    short_connector(settings.url)  # a malformed URL is refused before anything starts
    report = asyncio.run(run_worker(settings))
    took = f" in {report.shutdown_s:.2f}s" if report.shutdown_s is not None else ""
    click.echo(f"echomq worker {report.name}: stopped{took}; completed {report.completed}, "
               f"failed {report.failed}, handed back {report.handed_back}", err=True)


@main.command()
@click.argument("target")
@URL
@click.option("--once", is_flag=True, help="one pass: admit what is due now, print it, exit")
def schedule(target: str, url: str | None, once: bool) -> None:
    """Run the schedules at TARGET (package.module:NAME, a Schedule or a list of them).

    Each tick is admitted once however many of these (or workers with the same
    schedules) run. SIGTERM or SIGINT stops it (exit 0).
    """
    import asyncio

    from echomq.client._async.connect import connect_async
    from echomq.ops.worker import load_target
    from echomq.protocol.schedules import Schedule

    found = load_target(target)
    schedules = [found] if isinstance(found, Schedule) else found
    if not isinstance(schedules, list | tuple) or not all(isinstance(x, Schedule) for x in schedules):
        raise click.UsageError(f"{target} is not a Schedule or a list of Schedules")
    connector = short_connector(_url(url))  # a malformed URL: one line, nothing started
    if not once:
        connector = connect_async(_url(url))  # the default retry budget: it runs for long
    asyncio.run(_schedule(connector, list(schedules), once))


async def _schedule(connector: Any, schedules: list[Any], once: bool) -> None:
    import asyncio
    import signal

    from echomq.client._async.scheduler import AsyncScheduler

    scheduler = AsyncScheduler(connector, schedules, name="echomq schedule")
    loop = asyncio.get_running_loop()

    def admitted(fired: tuple[Any, int, str]) -> None:
        click.echo(f"{fired[0].queue} {fired[0].name} tick {fired[1]} admitted {fired[2]}")

    try:
        if once:
            for fired in await scheduler.tick():
                admitted(fired)
            return
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, scheduler.stop)
        await scheduler.run(on_admit=admitted)
    finally:
        await connector.aclose()


@main.command()
@click.option("--port", type=click.IntRange(0, 65_535), default=6379, show_default=True,
              help="0: any free port")
@click.option("--dir", "data_dir", type=click.Path(file_okay=False), default=None,
              help="keep the data (AOF) here; default: a temporary directory removed at exit")
def server(port: int, data_dir: str | None) -> None:
    """Run an embedded Valkey on 127.0.0.1 for local use until Ctrl-C."""
    from echomq.servers.server import serve_forever

    serve_forever(port=port or None, data_dir=data_dir, handle_signals=False,
                  ready=lambda url: click.echo(f"valkey on {url} (ECHOMQ_URL={url}); Ctrl-C stops it"))


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
        from echomq.ops.dashboard import DashboardOptions
        from echomq.ops.dashboard.app import serve
    except ImportError as exc:
        raise click.ClickException(f"the dashboard needs its extra: pip install 'echomq[dashboard]' ({exc})"
                                   ) from None
    url = url or server_url_from_env()
    if not url:
        raise click.UsageError("give --url or set ECHOMQ_URL")
    # An unreachable server, a bad token or a busy port: one line from the group (clikit).
    serve(url, host=host, port=port, options=DashboardOptions(token=token or None, read_only=read_only))
