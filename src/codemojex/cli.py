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
