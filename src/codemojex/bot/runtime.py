"""The bot's composition root: the game's tree plus the bot's children, one ``one_for_one`` tree.

Children in dependency order (each produces work only for children before it):

1. ``game``      the game's own tree (:class:`codemojex.game.app.App`): cache, notify on
                 ``cm.notify`` with the Telegram delivery (beat 50 ms, lease 15 s),
                 score, settle, relay. It starts only once Telegram's rate budget is
                 set on ``cm.notify`` (:func:`~codemojex.bot.ratebudget.apply_budget`),
                 so no notifier of this tree ever sends outside it
2. ``upkeep``    the series keeper (when the bot runs a series), the budget kept set,
                 the results told at settlement (:mod:`codemojex.bot.upkeep`)
3. ``commands``  the command consumer on ``cm.commands`` (beat 100 ms, lease 10 s);
                 produces replies on ``cm.notify``
4. ``ingress``   the webhook server or the long-polling loop; produces commands

**One way to run it**: :meth:`BotApp.run` (``until_signal=True`` for a process that
stops on SIGINT/SIGTERM). The tree is private: every entry point (the token, the
webhook, the stand-in demo, the tests, the season test's subprocess) runs the same
method, and the budget is applied inside the tree itself, not beside it
(the review found ``codemojex bot --token`` running the tree without it).

A child that dies is restarted alone; jobs it held come back when their leases
expire. :meth:`BotApp.aclose` closes the aiogram client session.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from dataclasses import dataclass, field
from typing import Literal

from codemojex.bot import commands, replies
from codemojex.bot.admin import Admin
from codemojex.bot.announce import Announcer, ScoreBatcher
from codemojex.bot.commands import CommandWorker
from codemojex.bot.ingress import Ingress, commands_queue
from codemojex.bot.metrics import GameMetrics, Sources
from codemojex.bot.polling import ALLOWED_UPDATES, Poller
from codemojex.bot.ratebudget import BudgetOptions, apply_budget
from codemojex.bot.roundclock import RoundClock
from codemojex.bot.telegram import BotState, LocalWindow, TelegramDelivery, make_bot, warm_up_models
from codemojex.bot.upkeep import Upkeep
from codemojex.bot.webhook import WebhookServer, check_secret
from codemojex.domain.errors import ConfigurationError
from codemojex.game.app import App
from codemojex.service import RoundPlan, Services, series
from codemojex.service.series import SeriesSettings
from codemojex.workers import notify
from echomq import ChildSpec, ConsumerChild, ConsumerOptions, Supervisor

__all__ = ["BotApp", "BotSettings", "ensure_rounds"]

log = logging.getLogger("codemojex.bot")
BUDGET_RETRY_S = 0.5  # Valkey unreachable at start: try again, never start the notifiers without it


@dataclass(frozen=True, slots=True, kw_only=True)
class BotSettings:
    """How the bot runs. ``mode``: ``polling`` (no public address needed), ``webhook``
    (Telegram POSTs to ``webhook_url``, served on ``listen_host:listen_port``), or
    ``none`` (no ingress: tests feed the commands queue themselves)."""

    token: str
    api_base: str | None = None  # None: Telegram itself; else e.g. the stand-in's base URL
    mode: Literal["polling", "webhook", "none"] = "polling"
    webhook_url: str | None = None
    secret: str | None = None
    listen_host: str = "127.0.0.1"
    listen_port: int = 8080
    webhook_path: str = "/telegram/webhook"
    poll_timeout_s: int = 25
    start_coins: int = commands.START_COINS
    daily_coins: int = commands.DAILY_COINS
    admins: frozenset[int] = frozenset()  # Telegram user ids allowed the operators' commands
    metrics_port: int | None = None  # serve the game's metrics on 127.0.0.1:<port> (0: any free port)
    budget: BudgetOptions = field(default_factory=BudgetOptions)
    commands: ConsumerOptions = commands.OPTIONS

    def __post_init__(self) -> None:
        if self.mode == "webhook":
            if not self.webhook_url or not self.secret:
                raise ConfigurationError("webhook mode needs --webhook URL and --secret")
            check_secret(self.secret)


class BotApp:
    """The whole bot over ``services``; run with :meth:`run`, stop with :meth:`stop`."""

    def __init__(self, services: Services, settings: BotSettings, *,
                 series: SeriesSettings | None = None) -> None:
        self.services = services
        self.settings = settings
        self.bot = make_bot(settings.token, settings.api_base)
        self.state = BotState(services.connector, settings.budget.namespace)
        b = settings.budget
        self.scores = ScoreBatcher(services, self.state)
        self.announcer = Announcer(services, self.state)
        # What speaks of a round's time is written again as it is sent (bot/roundclock.py).
        self.round_clock = RoundClock(services, self.state, scores=self.scores.render)
        self.delivery = TelegramDelivery(self.bot, self.state, stale_ms=b.stale_ms,
                                         local=LocalWindow(b.overall, b.per_chat,
                                                           (b.window_ms + b.margin_ms) / 1000),
                                         render={replies.KIND_SCORES: self.round_clock.scores,
                                                 replies.KIND_ROUND: self.round_clock.round},
                                         after={replies.KIND_ACCEPTED: self.scores.on_accepted})
        self.round_clock.clock = self.delivery.clock  # one measure of the server's clock, kept by upkeep
        self.series = series
        self.game = App(services, delivery=self.delivery, on_score=self.scores.on_score)
        self.admin = Admin(services, settings.admins, language_of=self.state.language_of)
        d = self.delivery
        self.metrics = GameMetrics(services.pool, Sources(
            sent=lambda: d.sent,
            deferred=lambda: {"429": d.retried_after, "stale": d.stale, "local": d.held_locally},
            reconciler=lambda: {"requeued": self.game.reconciler.requeued,
                                "readmitted": self.game.reconciler.readmitted,
                                "settled": len(self.game.reconciler.settled)},
            paused=lambda: self.upkeep.paused))
        self.ingress = Ingress(commands_queue(services), self.bot.id)
        self.worker = CommandWorker(services, start_coins=settings.start_coins,
                                    daily_coins=settings.daily_coins, answer_callback=self._answer,
                                    on_contact=self.state.unblock, on_language=self.state.set_language,
                                    admin=self.admin)
        self.commands = ConsumerChild(self.ingress.queue, self.worker.handle, settings.commands)
        self.webhook: WebhookServer | None = None
        self.poller: Poller | None = None
        self.upkeep = Upkeep(services, settings.budget, series=series,
                             duties=[("announce", self.announcer), ("metrics", self.metrics.refresh),
                                     ("clock", self.delivery.clock.calibrate)])
        children = [ChildSpec("game", self._game, stop=self.game.stop, shutdown_s=30.0),
                    ChildSpec("upkeep", self.upkeep.run, stop=self.upkeep.stop, shutdown_s=5.0)]
        children.append(self.commands.spec("commands"))
        if settings.mode == "webhook":
            assert settings.secret is not None
            self.webhook = WebhookServer(self.ingress, secret=settings.secret, host=settings.listen_host,
                                         port=settings.listen_port, path=settings.webhook_path)
            children.append(ChildSpec("ingress", self._serve_webhook, stop=self.webhook.stop, shutdown_s=5.0))
        elif settings.mode == "polling":
            self.poller = Poller(self.bot, self.ingress, timeout_s=settings.poll_timeout_s)
            children.append(ChildSpec("ingress", self.poller.run, shutdown_s=1.0))
        self._tree = Supervisor(children, strategy="one_for_one", name="codemojex-bot")
        self.budget_applied = asyncio.Event()

    async def _game(self) -> None:
        # Telegram's budget is the notification queue's rate limits, kept by the claim gate:
        # set before the first notifier of the tree can claim (retried while Valkey is away).
        while True:
            try:
                await apply_budget(self.services.notifications, self.settings.budget)
                break
            except Exception as exc:  # Valkey away at start: the notifiers wait for it
                log.warning("cannot set the rate budget yet (%r); again in %.1fs", exc, BUDGET_RETRY_S)
                await asyncio.sleep(BUDGET_RETRY_S)
        self.budget_applied.set()
        await self._warm_up()
        await self.game.run()

    async def _warm_up(self) -> None:
        """Pay the client's first-call costs before the first lease: its models, and one
        pooled connection per concurrent send (``getMe`` calls side by side). A first send
        that opened its connection after its budget checks reached the stand-in up to
        0.3 s late, next to the sends after it (two to one chat 0.96 s apart)."""
        warm_up_models()
        calls = [self.bot.get_me(request_timeout=5) for _ in range(notify.OPTIONS.concurrency)]
        for result in await asyncio.gather(*calls, return_exceptions=True):
            if isinstance(result, Exception):  # best effort: the first sends pay it instead
                log.info("warm-up request failed (%r)", result)
                break

    async def _answer(self, callback_id: str) -> None:
        await self.bot.answer_callback_query(callback_id, request_timeout=5)

    async def _serve_webhook(self) -> None:
        assert self.webhook is not None and self.settings.webhook_url and self.settings.secret
        server = asyncio.create_task(self.webhook.run())
        try:
            await self.webhook.listening.wait()
            await self.bot.set_webhook(self.settings.webhook_url, secret_token=self.settings.secret,
                                       allowed_updates=ALLOWED_UPDATES)
        except BaseException:
            self.webhook.stop()
            await asyncio.gather(server, return_exceptions=True)
            raise
        await server

    async def run(self, *, until_signal: bool = False) -> None:
        """Run the whole bot until :meth:`stop` (and, with ``until_signal``, SIGINT/SIGTERM)."""
        if self.settings.metrics_port is not None:
            port = self.metrics.serve(self.settings.metrics_port)
            log.info("game metrics on http://127.0.0.1:%d/metrics", port)
        try:
            if not until_signal:
                await self._tree.run()
                return
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self.stop)
            try:
                await self._tree.run()
            finally:
                for sig in (signal.SIGTERM, signal.SIGINT):
                    loop.remove_signal_handler(sig)
        finally:
            self.metrics.close()

    def stop(self) -> None:
        self._tree.stop()

    @property
    def children(self) -> list[str]:
        return [c.name for c in self._tree.children]

    async def aclose(self) -> None:
        """Close the Telegram client's HTTP session (after :meth:`run` returned)."""
        await self.bot.session.close()


async def ensure_rounds(services: Services, plan: RoundPlan) -> str | None:
    """Resume the bot's one series (PostgreSQL keeps it); the series id if this started it."""
    return await series.ensure_rounds(services, plan)
