"""``codemojex bot``: run the Telegram bot (polling or webhook), or a demo on the stand-in.

It starts embedded Valkey and PostgreSQL on the data directory (``--data``, default
``.codemojex/``, as ``codemojex play``; a server a crashed run left behind is stopped first)
unless ``ECHOMQ_URL`` / ``CODEMOJEX_DATABASE_URL`` name external ones, migrates the wallet,
and runs :class:`~codemojex.bot.runtime.BotApp` with :meth:`~codemojex.bot.runtime.BotApp.run`
(the one way to run the bot: the rate budget is set inside its tree) until SIGINT/SIGTERM.
The bot's series is recorded in the data directory before its first round opens, so a
restart resumes it (:mod:`codemojex.bot.series`).
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

from codemojex.infra.datadir import DEFAULT_DIR

if TYPE_CHECKING:
    from codemojex.bot.runtime import BotApp
    from codemojex.bot.standin import StandIn
    from codemojex.infra.datadir import DataDir
    from codemojex.service.series import SeriesSettings

__all__ = ["bot"]

DEMO = ["/start", "/round", "😀 😎 🤖 👻 🐱 🐶", "hello", "/quick", "/balance", "/top", "/nonsense"]


@click.command()
@click.option("--token", envvar="CODEMOJEX_BOT_TOKEN", help="the bot token from @BotFather")
@click.option("--polling", "mode", flag_value="polling", default=True, help="long polling (default)")
@click.option("--webhook", "webhook_url", help="public HTTPS URL Telegram should POST updates to")
@click.option("--secret", envvar="CODEMOJEX_WEBHOOK_SECRET", help="webhook secret token (A-Z a-z 0-9 _ -)")
@click.option("--listen", default="127.0.0.1:8080", show_default=True, help="webhook server address")
@click.option("--api-base", envvar="CODEMOJEX_BOT_API_BASE",
              help="Bot API server base URL (default: Telegram's)")
@click.option("--admins", envvar="CODEMOJEX_ADMINS", default="",
              help="Telegram user ids allowed the operators' commands, comma-separated")
@click.option("--metrics-port", envvar="CODEMOJEX_METRICS_PORT", type=click.IntRange(0, 65535), default=None,
              help="serve the game's Prometheus metrics on 127.0.0.1:PORT")
@click.option("--standin", is_flag=True, help="demo against the local Bot API stand-in")
@click.option("--data", "data_dir", default=DEFAULT_DIR, show_default=True, type=click.Path(file_okay=False),
              help="where the embedded servers keep their data and the bot its series")
@click.option("--cluster", is_flag=True, help="run on a local Valkey Cluster (3 primaries, 3 replicas)")
@click.option("--round-seconds", default=300.0, show_default=True, type=click.FloatRange(0.5, 86_400.0),
              help="how long each round is open")
@click.option("--rounds", default=10_000, show_default=True, type=click.IntRange(1, 10**9),
              help="rounds in the series")
@click.option("--price", default=10, show_default=True, type=click.IntRange(1, 10**9),
              help="coins per guess")
@click.option("-v", "--verbose", is_flag=True)
def bot(token: str | None, mode: str, webhook_url: str | None, secret: str | None, listen: str,
        api_base: str | None, admins: str, metrics_port: int | None, standin: bool, data_dir: str,
        cluster: bool, round_seconds: float, rounds: int, price: int, verbose: bool) -> None:
    """Run the Telegram bot (see README: "Run the bot for real").

    The servers' data and the bot's series stay in --data: run the same command again
    after a crash (kill -9 included) and the bot resumes its series on the same wallets.
    """
    from codemojex.bot.admin import parse_admins
    from codemojex.bot.commands import DAILY_COINS, START_COINS
    from codemojex.bot.runtime import BotSettings
    from codemojex.infra.datadir import DataDir
    from codemojex.infra.servers import started_servers
    from codemojex.service.series import SeriesSettings

    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(message)s")
    if not standin and not token:
        raise click.UsageError("--token (or CODEMOJEX_BOT_TOKEN) is required, or use --standin")
    host, _, port = listen.rpartition(":")
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise click.BadParameter(f"{listen!r} is not HOST:PORT", param_hint="--listen")
    try:
        admin_ids = parse_admins(admins)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--admins") from None
    settings = None
    if not standin:
        assert token is not None
        settings = BotSettings(token=token, api_base=api_base, mode="webhook" if webhook_url else "polling",
                               webhook_url=webhook_url, secret=secret, listen_host=host or "127.0.0.1",
                               listen_port=int(port), admins=admin_ids, metrics_port=metrics_port)
    plan = SeriesSettings(round_ms=int(round_seconds * 1000), price=price, rounds=rounds,
                          start_grant=START_COINS, daily_topup=DAILY_COINS)
    console = Console()
    data = DataDir(data_dir)
    kept = data.load().get("bot_topology")
    if isinstance(kept, dict) and "cluster" in kept:  # a series resumes where it was played
        if cluster and kept["cluster"] is False:
            raise click.UsageError(f"the bot's series in {data.path} runs on one Valkey: "
                                   "start it without --cluster")
        cluster = bool(kept["cluster"])
    else:
        data.update(bot_topology={"cluster": cluster})
    # durable: a Valkey killed loses no acknowledged write, so no answer is sent twice
    with started_servers(console, data, cluster=cluster, durable=True) as (url, pg_url):
        ok = asyncio.run(_main(url, pg_url, settings, plan, data, console))
    sys.exit(0 if ok else 1)


async def _main(valkey_url: str, pg_url: str, settings: object, plan: SeriesSettings, data: DataDir,
                console: Console) -> bool:
    from codemojex.bot.runtime import BotApp, BotSettings
    from codemojex.bot.standin import StandIn
    from codemojex.service import Services
    from codemojex.service.database import migrate_then_open
    from echomq import connect_async

    # migrations run as the owner role; the bot itself as the game's role, like play
    pool = await migrate_then_open(pg_url, min_size=2, max_size=16)
    connector = connect_async(valkey_url)
    try:
        services = Services(pool, connector)

        if isinstance(settings, BotSettings):
            app = BotApp(services, settings, series=plan)
            console.print(f"[bold]codemojex bot[/] ({settings.mode}), data in {data.path}; Ctrl-C stops it")
            try:
                await app.run(until_signal=True)
            finally:
                await app.aclose()
                d, n = app.delivery, app.scores
                console.print(f"codemojex bot: stopped; {d.sent} messages sent, {d.retried_after} answered"
                              f" 429, {d.stale} leases too old to use, {d.held_locally} held by the local"
                              f" window; score notices: {n.written} written, {n.after_result} dropped (the"
                              f" result went first), {n.unanswered} dropped (no guess answered yet),"
                              f" {n.held_back} lines held back")
            return True
        async with StandIn() as api:
            demo = BotSettings(token=api.token, api_base=api.base, poll_timeout_s=1)
            return await _demo(BotApp(services, demo, series=plan), api, console)
    finally:
        await connector.aclose()
        await pool.close()


async def _demo(app: BotApp, api: StandIn, console: Console) -> bool:
    from codemojex.infra.waiting import wait_for
    from codemojex.service import current_round

    tree = asyncio.create_task(app.run())
    user = 100_000 + os.getpid()

    def answers() -> list[str]:  # the score notice comes from the score consumer, in its own time
        return [t for t in api.texts(user) if not t.startswith("📊")]

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
            scores = [t for t in api.texts(user) if t.startswith("📊")]
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
