"""The Telegram :class:`~codemojex.workers.notify.Delivery`: aiogram's ``Bot`` as a client.

One note, one ``sendMessage``, classified (docs/decisions/0007-telegram-client.md):

=====================================  ==========================================
what happened                          result (→ the notify consumer's outcome)
=====================================  ==========================================
sent (200)                             Delivered → ack
the rate budget says "not yet"        never reaches the handler: the claim gate holds the
                                       note back (ratebudget.py), no attempt counted
429 with ``retry_after``               RateLimited(retry_after) → defer, no failure counted
                                       (sent again only through a new lease, so every
                                       request to Telegram is one lease of the budget)
403 (the user blocked the bot)         Delivered → ack; the chat is remembered
5xx, network error, timeout            Failed → backoff (a failure, 1 s, 2 s, 4 s …)
any other API error (400 …)            Failed → backoff, dead at the failure limit
=====================================  ==========================================

Duplicates are kept to a minimum (delivery is at-least-once): after Telegram
accepts a message the delivery writes a *sent marker* for the note id
(``cm:bot:{<ns>}:sent:<id>``, kept one hour) before the consumer acks, and every
delivery checks the marker first. A notifier that dies after the send and before
the ack therefore does not send again when the job re-runs; only a death in the
sub-millisecond gap between Telegram's answer and the marker write (or a reply
lost on the network) can repeat a message.
"""

from __future__ import annotations

import logging

from aiogram import Bot
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer
from aiogram.exceptions import (
    TelegramAPIError,
    TelegramForbiddenError,
    TelegramRetryAfter,
)
from aiogram.types import InlineKeyboardButton, InlineKeyboardMarkup

from codemojex.bot.replies import Keyboard, chat_for, keyboard_for
from codemojex.service.codec import Note
from codemojex.workers.notify import Delivered, DeliveryResult, Failed, RateLimited
from echomq import AsyncClusterConnector, AsyncConnector, BackoffPolicy

# 1 s, 2 s, 4 s … capped at 60 s, ±20 % jitter (a note's failed sends, counted by the delivery).
_BACKOFF = BackoffPolicy(base_ms=1000, factor=2.0, max_ms=60_000, jitter=0.2)

__all__ = ["SENT_TTL_S", "BotState", "TelegramDelivery", "make_bot", "markup"]

log = logging.getLogger("codemojex.bot.telegram")

SENT_TTL_S = 3600  # as long as a finished job's id refuses duplicates (keep_done_ms)
SEND_TIMEOUT_S = 10  # well inside the notifier's 15 s lease, so a hung send never outlives it


def make_bot(token: str, api_base: str | None = None) -> Bot:
    """An aiogram ``Bot`` (a client only: no dispatcher), optionally at another API server."""
    if api_base is None:
        return Bot(token)
    return Bot(token, session=AiohttpSession(api=TelegramAPIServer.from_base(api_base)))


def markup(keyboard: Keyboard | None) -> InlineKeyboardMarkup | None:
    if keyboard is None:
        return None
    return InlineKeyboardMarkup(inline_keyboard=[
        [InlineKeyboardButton(text=label, callback_data=data) for label, data in row] for row in keyboard])


class BotState:
    """What the bot remembers in Valkey: blocked chats and sent markers (one hash tag)."""

    def __init__(self, connector: AsyncConnector | AsyncClusterConnector,
                 namespace: str = "telegram") -> None:
        self.connector = connector
        self.blocked_key = f"cm:bot:{{{namespace}}}:blocked"
        self._sent = f"cm:bot:{{{namespace}}}:sent:"

    async def is_blocked(self, chat_id: int) -> bool:
        return bool(await self.connector.command("SISMEMBER", self.blocked_key, chat_id))

    async def block(self, chat_id: int) -> None:
        await self.connector.command("SADD", self.blocked_key, chat_id)

    async def unblock(self, chat_id: int) -> None:
        """The user wrote to the bot again, so it may answer again."""
        await self.connector.command("SREM", self.blocked_key, chat_id)

    async def was_sent(self, note_id: str) -> bool:
        return bool(await self.connector.command("EXISTS", self._sent + note_id))

    async def mark_sent(self, note_id: str) -> None:
        await self.connector.command("SET", self._sent + note_id, 1, "EX", SENT_TTL_S)


class TelegramDelivery:
    """Sends notes to players' private chats through ``bot``; the notifications queue's
    rate limits are the budget (:func:`~codemojex.bot.ratebudget.apply_budget`)."""

    def __init__(self, bot: Bot, state: BotState) -> None:
        self.bot = bot
        self.retried_after = 0  # 429 answers seen
        self.state = state
        self.sent = 0
        self.skipped = 0  # notes for players without a Telegram chat, or blocked chats
        self._failures: dict[str, int] = {}

    def _backoff_ms(self, note_id: str) -> int:
        """1 s, 2 s, 4 s … (cap 60 s, ±20% jitter) by this process's failures of the note.

        Counted here, not from the lease's attempt: every rate-budget deferral takes an
        attempt too, so the attempt says nothing about how often sending failed."""
        if len(self._failures) > 10_000:
            self._failures.clear()
        n = self._failures[note_id] = self._failures.get(note_id, 0) + 1
        return _BACKOFF.delay_ms(n)

    async def deliver(self, note_id: str, note: Note) -> DeliveryResult:
        chat = chat_for(note.player)
        if chat is None:
            self.skipped += 1
            return Delivered()  # a simulated player: nobody to tell
        if await self.state.was_sent(note_id):
            return Delivered()  # a re-run after a crash between the send and the ack
        if await self.state.is_blocked(chat):
            self.skipped += 1
            return Delivered()
        # The budget was spent by the lease this handler runs under. A 429 is not sent again
        # in place (that request would take no token): the note is deferred, and its next
        # lease takes one. A deferred serial lane's head keeps its lane and goes first again.
        try:
            await self.bot.send_message(chat_id=chat, text=note.text,
                                        reply_markup=markup(keyboard_for(note.kind)),
                                        request_timeout=SEND_TIMEOUT_S)
        except TelegramRetryAfter as exc:
            self.retried_after += 1
            return RateLimited(max(1, exc.retry_after) * 1000)
        except TelegramForbiddenError:
            log.info("chat %s blocked the bot; its notes are dropped until it writes again", chat)
            await self.state.block(chat)
            return Delivered()
        except TelegramAPIError as exc:  # 5xx, network, timeout, 400 …: a failure, backed off
            return Failed(f"{type(exc).__name__}: {exc}"[:500], retry_ms=self._backoff_ms(note_id))
        self.sent += 1
        self._failures.pop(note_id, None)
        try:
            await self.state.mark_sent(note_id)
        except Exception as exc:  # the message is out; a failed marker only risks a repeat
            log.warning("sent %s but could not mark it (%r)", note_id, exc)
        return Delivered()
