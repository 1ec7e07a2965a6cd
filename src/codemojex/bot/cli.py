"""``codemojex bot``: run the Telegram bot (polling or webhook), or a demo on the stand-in.

It starts embedded Valkey and PostgreSQL unless ``ECHOMQ_URL`` / ``CODEMOJEX_DATABASE_URL``
name external ones, migrates the wallet, starts a series of rounds unless one is being
played, and runs :class:`~codemojex.bot.runtime.BotApp` until SIGINT/SIGTERM.
``--standin`` runs everything against the local Bot API stand-in and plays a short
scripted conversation, printing what the bot answers: no token, no internet.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from typing import TYPE_CHECKING

import click
from rich.console import Console

if TYPE_CHECKING:
    from codemojex.bot.runtime import BotApp
    from codemojex.bot.standin import StandIn

__all__ = ["bot"]

DEMO = ["/start", "/round", "😀 😎 🤖 👻 🐱 🐶", "hello", "/quick", "/balance", "/top", "/nonsense"]


@click.command()
@click.option("--token", envvar="CODEMOJEX_BOT_TOKEN", help="the bot token from @BotFather")
@click.option("--polling", "mode", flag_value="polling", default=True, help="long polling (default)")
@click.option("--webhook", "webhook_url", help="public HTTPS URL Telegram should POST updates to")
@click.option("--secret", envvar="CODEMOJEX_WEBHOOK_SECRET", help="webhook secret token (A-Z a-z 0-9 _ -)")
@click.option("--listen", default="127.0.0.1:8080", show_default=True, help="webhook server address")
@click.option("--api-base", help="Bot API server base URL (default: Telegram's)")
@click.option("--standin", is_flag=True, help="demo against the local Bot API stand-in")
@click.option("--round-seconds", default=300.0, show_default=True, help="how long each round is open")
@click.option("--price", default=10, show_default=True, help="coins per guess")
@click.option("-v", "--verbose", is_flag=True)
def bot(token: str | None, mode: str, webhook_url: str | None, secret: str | None, listen: str,
        api_base: str | None, standin: bool, round_seconds: float, price: int, verbose: bool) -> None:
    """Run the Telegram bot (see docs/operating.md: "Play in Telegram")."""
    from codemojex.bot.runtime import BotSettings
    from codemojex.servers import started_servers

    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(message)s")
    if not standin and not token:
        raise click.UsageError("--token (or CODEMOJEX_BOT_TOKEN) is required, or use --standin")
    host, _, port = listen.rpartition(":")
    settings = None
    if not standin:
        assert token is not None
        settings = BotSettings(token=token, api_base=api_base, mode="webhook" if webhook_url else "polling",
                               webhook_url=webhook_url, secret=secret, listen_host=host or "127.0.0.1",
                               listen_port=int(port))
    console = Console()
    with started_servers(console) as (url, pg_url):
        ok = asyncio.run(_main(url, pg_url, settings, round_seconds, price, console))
    sys.exit(0 if ok else 1)


async def _main(valkey_url: str, pg_url: str, settings: object, round_s: float, price: int,
                console: Console) -> bool:
    from codemojex.bot.runtime import BotApp, BotSettings, ensure_rounds
    from codemojex.bot.standin import StandIn
    from codemojex.pg import open_pool
    from codemojex.service import RoundPlan, Services
    from codemojex.wallet import migrate
    from echomq import connect_async, run_until_signal

    pool = await open_pool(pg_url, min_size=2, max_size=16)
    connector = connect_async(valkey_url)
    try:
        await migrate(pool)
        services = Services(pool, connector)
        plan = RoundPlan(count=10_000, duration_ms=int(round_s * 1000), price=price)
        if await ensure_rounds(services, plan):
            console.print(f"started a series of {round_s:g}-second rounds")
        if isinstance(settings, BotSettings):
            app = BotApp(services, settings)
            console.print(f"[bold]codemojex bot[/] ({settings.mode}); Ctrl-C stops it")
            try:
                await run_until_signal(app.supervisor)
            finally:
                await app.aclose()
            return True
        async with StandIn() as api:
            demo = BotSettings(token=api.token, api_base=api.base, poll_timeout_s=1)
            return await _demo(BotApp(services, demo), api, console)
    finally:
        await connector.aclose()
        await pool.close()


async def _demo(app: BotApp, api: StandIn, console: Console) -> bool:
    from codemojex.service import current_round
    from codemojex.waiting import wait_for

    tree = asyncio.create_task(app.run())
    user = 100_000 + os.getpid()

    def answers() -> list[str]:  # score notes come from the score consumer, in their own time
        return [t for t in api.texts(user) if "scored" not in t]

    async def has_round() -> bool:
        return await current_round(app.services) is not None

    try:
        await wait_for(has_round, timeout_s=30, what="the first round")
        shown_scores = 0
        for text in DEMO:
            seen = len(answers())
            console.print(f"[bold cyan]you:[/] {text}")
            await api.push(api.message_update(user, text, name="Demo"))
            want = seen + (2 if text == "/start" else 1)

            async def answered(want: int = want) -> bool:
                return len(answers()) >= want

            await wait_for(answered, timeout_s=15, what=f"the answer to {text!r}")
            for reply in answers()[seen:]:
                console.print(f"[bold green]bot:[/] {reply}\n")
            scores = [t for t in api.texts(user) if "scored" in t]
            for note in scores[shown_scores:]:
                console.print(f"[bold magenta]bot (score):[/] {note}\n")
            shown_scores = len(scores)
        return True
    except TimeoutError as exc:
        console.print(f"[red]{exc}[/]")
        return False
    finally:
        app.stop()
        await tree
        await app.aclose()
