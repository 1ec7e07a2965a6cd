"""``codemojex``: the game's command line. ``codemojex play`` is the main job.

It starts embedded Valkey (or uses ``ECHOMQ_URL``) and embedded PostgreSQL (or
``CODEMOJEX_DATABASE_URL``), runs the game with simulated players through the
real service and consumers, prints the leaderboard, payouts, rates and audit,
and exits non-zero if the audit fails.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from importlib import metadata
from typing import TYPE_CHECKING, Any

import click

from codemojex.domain.errors import CodemojexError
from codemojex.infra.datadir import DEFAULT_DIR
from echomq import clikit

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool
    from rich.console import Console

    from echomq import AsyncClusterConnector, AsyncConnector

# What a verb needs beyond click (redis-py, asyncio, rich, psycopg) is imported inside
# it, so a command refused for its arguments answers at once (test_cli_import.py).

__all__ = ["main"]


class _Group(clikit.Group):
    """One-line errors for the game's expected failures too (a PostgreSQL that refuses)."""

    expected = (*clikit.Group.expected, CodemojexError)
    expected_modules = (*clikit.Group.expected_modules, "psycopg.", "psycopg_pool")
    lazy = {"bot": "codemojex.bot.cli:bot"}  # noqa: RUF012 (aiogram is slow to import)


_OPTIONS = ("players", "guesses", "rounds", "round_seconds", "price")


def _given(ctx: click.Context, **flags: object) -> dict[str, object]:
    """The options of ``play`` given on the command line (or the environment), by name."""
    given = {name: ctx.params[name] for name in (*_OPTIONS, *flags)
             if ctx.get_parameter_source(name) not in (None, click.core.ParameterSource.DEFAULT)}
    return given


def _version() -> str:
    try:
        return metadata.version("codemojex")
    except metadata.PackageNotFoundError:
        return "unknown"


@click.group(cls=_Group, name="codemojex")
@click.version_option(_version(), prog_name="codemojex")
def main() -> None:
    """Codemojex, the emoji-guessing game on EchoMQ."""


@main.command()
@click.option("--players", default=300, show_default=True, help="simulated players")
@click.option("--guesses", default=5, show_default=True, help="guesses per player per round")
@click.option("--rounds", default=3, show_default=True, help="rounds, one after another")
@click.option("--round-seconds", default=15.0, show_default=True, help="how long each round is open")
@click.option("--price", default=10, show_default=True, help="coins per guess")
@click.option("--data", "data_dir", default=DEFAULT_DIR, show_default=True, type=click.Path(file_okay=False),
              help="where the embedded servers keep their data and the game in flight")
@click.option("--resume", is_flag=True, help="finish the game a crashed run left in --data (error if none)")
@click.option("--cluster", is_flag=True, help="play on a local Valkey Cluster (3 primaries, 3 replicas)")
@click.option("--score-shards", type=click.IntRange(0, 64), default=None,
              help="spread the scoring queue cm over N shards [3 with --cluster, else 0: one queue]")
@click.option("-v", "--verbose", is_flag=True, help="log what the consumers do")
def play(players: int, guesses: int, rounds: int, round_seconds: float, price: int, data_dir: str,
         resume: bool, cluster: bool, score_shards: int | None, verbose: bool) -> None:
    """Play full rounds end to end on embedded servers and print the audit.

    The servers' data stays in --data. If a run dies (kill -9, a crash), the same
    command (or --resume) stops the servers it left running, starts them again on
    their data and finishes every round in flight; its report covers the whole game.
    """
    import asyncio

    from rich.console import Console

    from codemojex.domain.errors import ConfigurationError, DatabaseError
    from codemojex.game.play import PlayOptions
    from codemojex.infra.datadir import DataDir
    from codemojex.infra.resume import check_same_servers, differences, servers_in_use
    from codemojex.infra.servers import started_servers
    from echomq import EchoMQError

    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(message)s")
    console = Console()
    try:
        opts = PlayOptions(players=players, guesses=guesses, rounds=rounds, round_s=round_seconds,
                           price=price)
        data = DataDir(data_dir)
        game = data.unfinished()
        if resume and game is None:
            raise ConfigurationError(f"nothing to resume in {data.path}: no game in flight")
        given = _given(click.get_current_context(), cluster=cluster, score_shards=score_shards)
        if game is not None:  # a game resumes where it was played: the same servers and queues
            kept = data.load().get("topology") or {}
            if cluster and kept.get("cluster") is False:
                raise ConfigurationError("the game in flight was played on one Valkey: resume it "
                                         "without --cluster")
            cluster = bool(kept.get("cluster", cluster))
            score_shards = kept.get("score_shards", score_shards)
        shards = (3 if cluster else 0) if score_shards is None else score_shards
        where = servers_in_use(cluster=cluster)
        if game is not None:
            check_same_servers(data.load().get("where"), where)
            for note in differences(given, game, data.load().get("topology") or {}):
                console.print(f"resuming the game in flight with its own options: {note}")
        else:
            data.update(topology={"cluster": cluster, "score_shards": shards}, where=where)
        with started_servers(console, data, cluster=cluster) as (url, pg_url):
            ok = asyncio.run(_play(url, pg_url, opts, console, data, game, shards))
    except (ConfigurationError, DatabaseError, EchoMQError, OSError, TimeoutError) as exc:
        kept = ""
        with contextlib.suppress(ConfigurationError):
            if DataDir(data_dir).unfinished() is not None:
                kept = (f"; the game in flight is kept in {data_dir}: "
                        f"codemojex play --data {data_dir} finishes it")
        click.echo(f"codemojex play: error: {exc}{kept}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:  # the servers were stopped on the way out; their data is kept
        click.echo(f"codemojex play: interrupted; the game in flight is kept in {data_dir}: "
                   f"codemojex play --data {data_dir} finishes it", err=True)
        sys.exit(130)
    sys.exit(0 if ok else 1)


@main.command()
@click.option("--players", default=300, show_default=True, type=click.IntRange(1, 100_000),
              help="simulated players, each guessing as fast as it is answered")
@click.option("--rounds", default=1, show_default=True, type=click.IntRange(1, 100))
@click.option("--round-seconds", default=10.0, show_default=True, type=click.FloatRange(0.1, 3600),
              help="how long each round is open")
@click.option("--in-flight", default=256, show_default=True, type=click.IntRange(1, 10_000),
              help="submissions at once over all players")
@click.option("--idle-seconds", default=5.0, show_default=True, type=click.FloatRange(0, 600),
              help="the quiet interval (no player) whose cost per second is taken off")
@click.option("--score-shards", type=click.IntRange(0, 64), default=0, show_default=True,
              help="spread the scoring queue cm over N shards")
@click.option("--json", "as_json", is_flag=True, help="print the report as one JSON object")
def bench(players: int, rounds: int, round_seconds: float, in_flight: int, idle_seconds: float,
          score_shards: int, as_json: bool) -> None:
    """Unpaced players end to end (charged, scored, told, settled) and the cost per guess.

    Runs on embedded servers in a temporary folder (or ECHOMQ_URL and
    CODEMOJEX_DATABASE_URL); exits 1 if the game's audit is not clean.
    """
    import asyncio
    import io
    import json
    import tempfile
    from pathlib import Path

    from rich.console import Console

    from codemojex.domain.errors import ConfigurationError, DatabaseError
    from codemojex.infra.datadir import DataDir
    from codemojex.infra.servers import started_servers
    from codemojex.ops.bench import BenchOptions, render
    from echomq import EchoMQError

    try:
        opts = BenchOptions(players=players, rounds=rounds, round_s=round_seconds, in_flight=in_flight,
                            idle_s=idle_seconds)
        with tempfile.TemporaryDirectory(prefix="codemojex-bench-") as tmp, \
                started_servers(Console(file=io.StringIO()), DataDir(Path(tmp) / "data")) as (url, pg_url):
            report = asyncio.run(_bench(url, pg_url, opts, score_shards))
    except (ConfigurationError, DatabaseError, EchoMQError, OSError, TimeoutError) as exc:
        click.echo(f"codemojex bench: error: {exc}", err=True)
        sys.exit(2)
    if as_json:
        click.echo(json.dumps(report.as_dict()))
    else:
        for line in render(report):
            click.echo(line)
    sys.exit(0 if report.audit_ok else 1)


async def _bench(valkey_url: str, pg_url: str, opts: object, score_shards: int) -> Any:
    from codemojex.ops.bench import BenchOptions
    from codemojex.ops.bench import bench as run
    from codemojex.service.database import migrate_then_open
    from codemojex.wallet import reads
    from echomq import connect_async

    assert isinstance(opts, BenchOptions)
    pool = await migrate_then_open(pg_url, min_size=4, max_size=24)
    connector = connect_async(valkey_url)
    try:
        with reads.retrying():
            return await run(pool, connector, opts, score_shards=score_shards)
    finally:
        await connector.aclose()
        await pool.close()


@main.command()
@click.option("--url", default=None, help="Valkey URL (default: ECHOMQ_URL)")
@click.option("--database-url", default=None, help="PostgreSQL URL (default: CODEMOJEX_DATABASE_URL)")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8700, show_default=True, type=click.IntRange(1, 65535))
@click.option("--token", envvar="ECHOMQ_DASHBOARD_TOKEN", default=None,
              help="secret that allows actions on jobs (default: ECHOMQ_DASHBOARD_TOKEN)")
@click.option("--read-only", is_flag=True, help="refuse every action, even with the token")
def dashboard(url: str | None, database_url: str | None, host: str, port: int, token: str | None,
              read_only: bool) -> None:
    """The EchoMQ dashboard with the game's page: rounds, pots, guesses, payouts, audit."""
    import os

    import psycopg
    from psycopg_pool import PoolTimeout

    from codemojex.ops.dashboard import game_page
    from echomq import EchoMQError, dashboard, server_url_from_env

    url = url or server_url_from_env()
    database_url = database_url or os.environ.get("CODEMOJEX_DATABASE_URL")
    if not url or not database_url:
        raise click.UsageError("give --url and --database-url (or ECHOMQ_URL and CODEMOJEX_DATABASE_URL)")
    try:
        dashboard.serve(url, host=host, port=port,
                        options=dashboard.DashboardOptions(token=token or None, read_only=read_only),
              pages=[game_page(database_url)])
    except (ValueError, OSError, EchoMQError, psycopg.Error, PoolTimeout) as exc:
        raise click.ClickException(f"{type(exc).__name__}: {exc}") from None


async def _play(valkey_url: str, pg_url: str, opts: object, console: Console, data: object,
                game: dict[str, object] | None, score_shards: int = 0) -> bool:
    from codemojex.game.play import PlayOptions
    from codemojex.infra.datadir import DataDir
    from codemojex.service.database import migrate_then_open
    from codemojex.wallet import reads
    from echomq import connect_async

    assert isinstance(opts, PlayOptions) and isinstance(data, DataDir)
    with reads.retrying():  # migrations as the owner role, then the game's privileges
        pool = await migrate_then_open(pg_url, min_size=4, max_size=24)
    connector = connect_async(valkey_url)
    try:
        with reads.retrying():  # every read of the run and its report rides out a restart
            return await _play_on(pool, connector, opts, console, data, game, score_shards)
    finally:
        await connector.aclose()
        await pool.close()


async def _play_on(pool: AsyncConnectionPool, connector: AsyncConnector | AsyncClusterConnector,
                   opts: object, console: Console, data: object, game: dict[str, object] | None,
                   score_shards: int) -> bool:
    from codemojex.game.play import PlayOptions, game_record
    from codemojex.game.play import play as run
    from codemojex.game.report import check_run, delivered_score_notes, print_report
    from codemojex.infra.datadir import DataDir
    from codemojex.service import Services

    assert isinstance(opts, PlayOptions) and isinstance(data, DataDir)
    services = Services(pool, connector, score_shards=score_shards)
    if score_shards:
        console.print(f"scoring queue {services.scores.name}: {score_shards} shards")
    _, tally, played = await run(services, opts, console, data=data, resume=game)
    notes = await delivered_score_notes(services, tally.round_ids)
    checks = await check_run(pool, tally.round_ids, score_notes=notes)
    await print_report(pool, tally, checks, console)
    if not (checks.unsettled or checks.unadmitted or checks.charged != checks.scored):
        data.update(game=game_record(played, tally) | {"finished": True})  # nothing in flight
    return checks.ok
