"""``codemojex``: the game's command line. ``codemojex play`` is the main job.

It starts embedded Valkey (or uses ``ECHOMQ_URL``) and embedded PostgreSQL (or
``CODEMOJEX_DATABASE_URL``), runs the game with simulated players through the
real service and consumers, prints the leaderboard, payouts, rates and audit,
and exits non-zero if the audit fails.
"""

from __future__ import annotations

import asyncio
import logging
import sys

import click
from rich.console import Console

from echomq import AsyncConnector

__all__ = ["main"]


@click.group()
def main() -> None:
    """Codemojex, the emoji-guessing game on EchoMQ."""


@main.command()
@click.option("--players", default=300, show_default=True, help="simulated players")
@click.option("--guesses", default=5, show_default=True, help="guesses per player per round")
@click.option("--rounds", default=3, show_default=True, help="rounds, one after another")
@click.option("--round-seconds", default=15.0, show_default=True, help="how long each round is open")
@click.option("--price", default=10, show_default=True, help="coins per guess")
@click.option("-v", "--verbose", is_flag=True, help="log what the consumers do")
def play(players: int, guesses: int, rounds: int, round_seconds: float, price: int, verbose: bool) -> None:
    """Play full rounds end to end on embedded servers and print the audit."""
    from codemojex.play import PlayOptions
    from codemojex.servers import started_servers

    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(message)s")
    opts = PlayOptions(players=players, guesses=guesses, rounds=rounds, round_s=round_seconds, price=price)
    console = Console()
    with started_servers(console) as (url, pg_url):
        ok = asyncio.run(_play(url, pg_url, opts, console))
    sys.exit(0 if ok else 1)


from codemojex.bot.cli import bot as _bot  # noqa: E402  (the subcommand lives with the bot)

main.add_command(_bot)


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

    from codemojex.dashboard import game_page
    from echomq.dashboard import DashboardOptions
    from echomq.dashboard.app import serve
    from echomq.errors import EchoMQError
    from echomq.server import server_url_from_env

    url = url or server_url_from_env()
    database_url = database_url or os.environ.get("CODEMOJEX_DATABASE_URL")
    if not url or not database_url:
        raise click.UsageError("give --url and --database-url (or ECHOMQ_URL and CODEMOJEX_DATABASE_URL)")
    try:
        serve(url, host=host, port=port, options=DashboardOptions(token=token or None, read_only=read_only),
              pages=[game_page(database_url)])
    except (ValueError, OSError, EchoMQError, psycopg.Error, PoolTimeout) as exc:
        raise click.ClickException(f"{type(exc).__name__}: {exc}") from None


async def _play(valkey_url: str, pg_url: str, opts: object, console: Console) -> bool:
    from codemojex.pg import open_pool
    from codemojex.play import PlayOptions
    from codemojex.play import play as run
    from codemojex.report import check_run, print_report
    from codemojex.service import Services
    from codemojex.wallet import migrate
    from codemojex.workers import ConsoleDelivery

    assert isinstance(opts, PlayOptions)
    pool = await open_pool(pg_url, min_size=4, max_size=24)
    connector = AsyncConnector.from_url(valkey_url)
    try:
        await migrate(pool)
        services = Services(pool, connector)
        app, tally = await run(services, opts, console)
        delivery = app.delivery
        score_notes = delivery.distinct("score") if isinstance(delivery, ConsoleDelivery) else None
        checks = await check_run(pool, tally.round_ids, score_notes=score_notes)
        await print_report(pool, tally, checks, console)
        return checks.ok
    finally:
        await connector.aclose()
        await pool.close()
