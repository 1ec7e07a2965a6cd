"""The bot's composition root: the game's tree plus the bot's children, one ``one_for_one`` tree.

Children in dependency order (each produces work only for children before it):

1. ``game``      the game's own tree (:class:`codemojex.app.App`): cache, notify on
                 ``cm.notify`` with the Telegram delivery (beat 50 ms, lease 15 s),
                 score, settle, relay
2. ``commands``  the command consumer on ``cm.commands`` (beat 100 ms, lease 10 s);
                 produces replies on ``cm.notify``
3. ``ingress``   the webhook server or the long-polling loop; produces commands

A child that dies is restarted alone; jobs it held come back when their leases
expire. :meth:`BotApp.aclose` closes the aiogram client session.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Literal

from codemojex.app import App
from codemojex.bot import commands
from codemojex.bot.commands import CommandWorker
from codemojex.bot.ingress import Ingress, commands_queue
from codemojex.bot.polling import ALLOWED_UPDATES, Poller
from codemojex.bot.ratebudget import BudgetOptions, apply_budget
from codemojex.bot.telegram import BotState, TelegramDelivery, make_bot
from codemojex.bot.webhook import WebhookServer, check_secret
from codemojex.errors import ConfigurationError
from codemojex.service import RoundPlan, Services, series
from echomq import ChildSpec, ConsumerChild, ConsumerOptions, Supervisor

__all__ = ["BotApp", "BotSettings", "ensure_rounds"]


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
    budget: BudgetOptions = field(default_factory=BudgetOptions)
    commands: ConsumerOptions = commands.OPTIONS

    def __post_init__(self) -> None:
        if self.mode == "webhook":
            if not self.webhook_url or not self.secret:
                raise ConfigurationError("webhook mode needs --webhook URL and --secret")
            check_secret(self.secret)


class BotApp:
    """The whole bot over ``services``; run with :meth:`run`, stop with :meth:`stop`."""

    def __init__(self, services: Services, settings: BotSettings) -> None:
        self.services = services
        self.settings = settings
        self.bot = make_bot(settings.token, settings.api_base)
        self.state = BotState(services.connector, settings.budget.namespace)
        self.delivery = TelegramDelivery(self.bot, self.state)
        self.game = App(services, delivery=self.delivery)
        self.ingress = Ingress(commands_queue(services), self.bot.id)
        self.worker = CommandWorker(services, start_coins=settings.start_coins,
                                    answer_callback=self._answer, on_contact=self.state.unblock)
        self.commands = ConsumerChild(self.ingress.queue, self.worker.handle, settings.commands)
        self.webhook: WebhookServer | None = None
        self.poller: Poller | None = None
        children = [ChildSpec("game", self.game.run, stop=self.game.stop, shutdown_s=30.0),
                    self.commands.spec("commands")]
        if settings.mode == "webhook":
            assert settings.secret is not None
            self.webhook = WebhookServer(self.ingress, secret=settings.secret, host=settings.listen_host,
                                         port=settings.listen_port, path=settings.webhook_path)
            children.append(ChildSpec("ingress", self._serve_webhook, stop=self.webhook.stop, shutdown_s=5.0))
        elif settings.mode == "polling":
            self.poller = Poller(self.bot, self.ingress, timeout_s=settings.poll_timeout_s)
            children.append(ChildSpec("ingress", self.poller.run, shutdown_s=1.0))
        self.supervisor = Supervisor(children, strategy="one_for_one", name="codemojex-bot")

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

    async def run(self) -> None:
        # Telegram's budget is the notification queue's rate limits, kept by the claim gate.
        await apply_budget(self.services.notifications, self.settings.budget)
        await self.supervisor.run()

    def stop(self) -> None:
        self.supervisor.stop()

    async def aclose(self) -> None:
        """Close the Telegram client's HTTP session (after :meth:`run` returned)."""
        await self.bot.session.close()


async def ensure_rounds(services: Services, plan: RoundPlan) -> str | None:
    """Resume the bot's one series (PostgreSQL keeps it); the series id if this started it."""
    return await series.ensure_rounds(services, plan)
