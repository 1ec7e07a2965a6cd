"""Long polling (``getUpdates``), for running without a public address.

The offset confirms updates to Telegram only *after* they were admitted: an
update fetched but not admitted (a crash, a Valkey outage) is fetched again, and
one admitted twice is refused as a duplicate. So every update is admitted exactly
once, without any local state. The webhook is deleted first (Telegram refuses
``getUpdates`` while one is set). Errors (network, 5xx, 409 while another poller
runs) are ridden out with capped backoff; the loop never exits on its own.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from codemojex.bot.ingress import Ingress
from echomq import BackoffDelays

if TYPE_CHECKING:  # the bot is made by telegram.make_bot, which imports aiogram
    from aiogram import Bot

__all__ = ["ALLOWED_UPDATES", "Poller"]

log = logging.getLogger("codemojex.bot.polling")

ALLOWED_UPDATES = ["message", "callback_query"]


class Poller:
    """Fetches updates with ``bot`` and hands them to ``ingress``; run under the supervisor."""

    def __init__(self, bot: Bot, ingress: Ingress, *, timeout_s: int = 25) -> None:
        self.bot = bot
        self.ingress = ingress
        self.timeout_s = timeout_s
        self.offset: int | None = None
        self.polls = 0

    async def run(self) -> None:
        await self.bot.delete_webhook(drop_pending_updates=False)
        delays = BackoffDelays(0.1, 10.0)
        while True:
            try:
                updates = await self.bot.get_updates(
                    offset=self.offset, timeout=self.timeout_s, allowed_updates=ALLOWED_UPDATES,
                    request_timeout=self.timeout_s + 10)
                self.polls += 1
                for update in updates:
                    await self.ingress.admit(update.model_dump(mode="json", by_alias=True, exclude_none=True))
                    self.offset = update.update_id + 1  # confirmed on the next getUpdates
                delays.reset()
            except Exception as exc:  # network, 5xx, 409, Valkey outage: never exit on our own
                delay = next(delays)
                log.warning("polling failed (%r); again in %.1fs", exc, delay)
                await asyncio.sleep(delay)
