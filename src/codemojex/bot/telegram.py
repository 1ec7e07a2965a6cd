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

A note is sent **at least once**, across a crash mid-send included
(docs/decisions/0042-notices-at-least-once.md): Telegram has no idempotency key, so a
crash between a request leaving and its answer being recorded cannot know whether the user
saw the message, and the bot chooses to send it again rather than risk a payout or a
round's result never reaching a player. After Telegram's 200 the delivery writes the
note's *send record* (``SET cm:bot:{<ns>}:sent:<id>``, kept one hour, in the bot's Valkey
beside the note's job, which syncs every write), then the consumer acks the job. A re-run
of a note whose record exists (the notifier died between the record and the ack) acks
without sending; a re-run of one with no record (died before the request, during it, or
after the answer and before the record) sends it. So a kill -9 loses no message; it
repeats only a message whose request had left and whose record had not been written (one
HTTP round trip of each task in flight). Decision 0039 took the other side (a marker
before the request: never twice, but a note lost if the kill fell between the marker and
the request); it is superseded.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

from codemojex.bot.replies import Keyboard, chat_for, keyboard_for
from codemojex.service.codec import Note
from codemojex.workers import notify
from codemojex.workers.notify import CURRENT_LEASE, Delivered, DeliveryResult, Failed, RateLimited
from echomq import AsyncClusterConnector, AsyncConnector, BackoffPolicy

# aiogram is imported where a bot is made or a message sent, never with this module:
# ``aiogram.types`` builds the pydantic schemas of its 444 types on import, seconds of CPU
# that a process reading, parsing or testing the bot's other parts does not need.
if TYPE_CHECKING:
    from aiogram import Bot
    from aiogram.types import InlineKeyboardMarkup

# 1 s, 2 s, 4 s … capped at 60 s, ±20 % jitter (a note's failed sends, counted by the delivery).
_BACKOFF = BackoffPolicy(base_ms=1000, factor=2.0, max_ms=60_000, jitter=0.2)

__all__ = ["SENT_TTL_S", "BotState", "LocalWindow", "ServerClock", "TelegramDelivery", "make_bot", "markup",
           "warm_up_models"]

log = logging.getLogger("codemojex.bot.telegram")

SENT_TTL_S = 3600  # as long as a finished job's id refuses duplicates (keep_done_ms)
SEND_TIMEOUT_S = 10  # well inside the notifier's 15 s lease, so a hung send never outlives it


def make_bot(token: str, api_base: str | None = None) -> Bot:
    """An aiogram ``Bot`` (a client only: no dispatcher), optionally at another API server."""
    from aiogram import Bot
    from aiogram.client.session.aiohttp import AiohttpSession
    from aiogram.client.telegram import TelegramAPIServer

    if api_base is None:
        return Bot(token)
    return Bot(token, session=AiohttpSession(api=TelegramAPIServer.from_base(api_base)))


def markup(keyboard: Keyboard | None) -> InlineKeyboardMarkup | None:
    if keyboard is None:
        return None
    from aiogram.types import InlineKeyboardButton, InlineKeyboardMarkup

    return InlineKeyboardMarkup(inline_keyboard=[
        [InlineKeyboardButton(text=label, callback_data=data) for label, data in row] for row in keyboard])


def warm_up_models() -> None:
    """Build and serialise one ``sendMessage`` with a keyboard and a quote, as a send does:
    pydantic builds its validators on first use (tens to hundreds of milliseconds)."""
    from aiogram.methods import SendMessage
    from aiogram.types import ReplyParameters

    method = SendMessage(chat_id=1, text="warm-up", reply_markup=markup(keyboard_for("bot")),
                         reply_parameters=ReplyParameters(message_id=1, allow_sending_without_reply=True))
    method.model_dump(exclude_none=True, warnings=False)


class BotState:
    """What the bot remembers in Valkey: blocked chats and sent markers (one hash tag)."""

    def __init__(self, connector: AsyncConnector | AsyncClusterConnector,
                 namespace: str = "telegram") -> None:
        self.connector = connector
        self.blocked_key = f"cm:bot:{{{namespace}}}:blocked"
        self.lang_key = f"cm:bot:{{{namespace}}}:lang"
        self.prefix = f"cm:bot:{{{namespace}}}:"
        self._sent = f"cm:bot:{{{namespace}}}:sent:"

    async def set_language(self, player: str, lang: str) -> None:
        """Remember the catalogue a player reads (from their last command)."""
        await self.connector.command("HSET", self.lang_key, player, lang)

    async def language_of(self, player: str) -> str:
        value = await self.connector.command("HGET", self.lang_key, player)
        return value.decode() if isinstance(value, bytes) else "en"

    async def is_blocked(self, chat_id: int) -> bool:
        return bool(await self.connector.command("SISMEMBER", self.blocked_key, chat_id))

    async def block(self, chat_id: int) -> None:
        await self.connector.command("SADD", self.blocked_key, chat_id)

    async def unblock(self, chat_id: int) -> None:
        """The user wrote to the bot again, so it may answer again."""
        await self.connector.command("SREM", self.blocked_key, chat_id)

    async def was_sent(self, note_id: str) -> bool:
        """Whether Telegram accepted this note before (its send record exists)."""
        return bool(await self.connector.command("EXISTS", self._sent + note_id))

    async def record_sent(self, note_id: str) -> None:
        """Write the note's send record: Telegram answered 200 (kept ``SENT_TTL_S``)."""
        await self.connector.command("SET", self._sent + note_id, 1, "EX", SENT_TTL_S)


class ServerClock:
    """The Valkey server's clock, read locally: an offset from ``time.monotonic`` measured
    with ``TIME`` (at the midpoint of its round trip) and measured again every ``every_s``."""

    def __init__(self, connector: AsyncConnector | AsyncClusterConnector, every_s: float = 10.0) -> None:
        self.connector = connector
        self.every_s = every_s
        self._offset_ms = 0.0
        self._at = -1e18

    async def calibrate(self) -> None:
        """Measure the offset again if it is older than ``every_s`` (the upkeep calls this
        every tick, so a send never waits for ``TIME`` between its marker and its request)."""
        if time.monotonic() - self._at > self.every_s:
            t0 = time.monotonic()
            server = await self.connector.server_time_ms()
            t1 = time.monotonic()
            self._offset_ms = server - (t0 + t1) * 500
            self._at = t1

    async def now_ms(self) -> float:
        if self._at < 0:
            await self.calibrate()
        return time.monotonic() * 1000 + self._offset_ms


class LocalWindow:
    """This process's own record of its sends over the budget's padded window: at most
    ``overall`` in any window and ``per_chat`` to one chat. The shared budget is the claim
    gate's; this guard holds while the gate's state is lost (a Valkey restarted from an AOF
    missing its last second) and costs a deque per process."""

    def __init__(self, overall: int, per_chat: int, window_s: float) -> None:
        self.overall, self.per_chat, self.window_s = overall, per_chat, window_s
        self._all: deque[float] = deque()
        self._chats: dict[int, deque[float]] = {}

    def wait_s(self, chat: int, now: float) -> float:
        """0 if a send to ``chat`` fits now (and records it), else how long until it would."""
        edge = now - self.window_s
        while self._all and self._all[0] <= edge:
            self._all.popleft()
        mine = self._chats.get(chat)
        while mine and mine[0] <= edge:
            mine.popleft()
        if len(self._chats) > 10_000:
            self._chats = {c: q for c, q in self._chats.items() if q}
        waits = [0.0]
        if len(self._all) >= self.overall:
            waits.append(self._all[-self.overall] + self.window_s - now)
        if mine and len(mine) >= self.per_chat:
            waits.append(mine[-self.per_chat] + self.window_s - now)
        wait = max(waits)
        if wait <= 0:
            self._all.append(now)
            self._chats.setdefault(chat, deque()).append(now)
        return max(0.0, wait)


class TelegramDelivery:
    """Sends notes to players' private chats through ``bot``; the notifications queue's
    rate limits are the budget (:func:`~codemojex.bot.ratebudget.apply_budget`).

    ``stale_ms``: a lease granted longer ago than this (on the server clock, from its
    deadline) when its request would leave is **not used**: the note is deferred to a
    fresh lease. The budget is kept where leases are granted; a process that stalls
    between the grant and the send (a loaded machine, a GC pause) would otherwise send
    late leases together with on-time ones, a burst where Telegram counts. None: off.
    """

    def __init__(self, bot: Bot, state: BotState, *, stale_ms: int | None = None,
                 lease_ms: int = notify.OPTIONS.lease_ms, local: LocalWindow | None = None,
                 render: Mapping[str, Callable[[Note], Awaitable[str | None]]] | None = None,
                 after: Mapping[str, Callable[[Note], Awaitable[object]]] | None = None) -> None:
        self.bot = bot
        self.retried_after = 0  # 429 answers seen
        self.state = state
        self.sent = 0
        self.stale = 0  # leases not used: they had waited past ``stale_ms``
        self.skipped = 0  # notes for players without a Telegram chat, or blocked chats
        self.not_repeated = 0  # re-runs of a note whose send record exists: not sent again
        self.stale_ms = stale_ms
        self.lease_ms = lease_ms
        self.clock = ServerClock(state.connector)
        self.local = local
        self.render = dict(render or {})  # kind -> writes the note's text at send time (None: skip)
        self.after = dict(after or {})  # kind -> told once Telegram took the note (best effort)
        self.held_locally = 0  # leases the local window refused (the gate's state was lost)
        self._failures: dict[str, int] = {}

    async def _stale(self) -> bool:
        lease = CURRENT_LEASE.get()
        if self.stale_ms is None or lease is None:
            return False
        age = await self.clock.now_ms() - (lease.deadline_ms - self.lease_ms)
        if age <= self.stale_ms:
            return False
        self.stale += 1
        log.debug("lease of %s granted %.0f ms ago: deferred to a fresh one", lease.id, age)
        return True

    def _backoff_ms(self, note_id: str) -> int:
        """1 s, 2 s, 4 s … (cap 60 s, ±20% jitter) by this process's failures of the note.

        Counted here, not from the lease's attempt: every rate-budget deferral takes an
        attempt too, so the attempt says nothing about how often sending failed."""
        if len(self._failures) > 10_000:
            self._failures.clear()
        n = self._failures[note_id] = self._failures.get(note_id, 0) + 1
        return _BACKOFF.delay_ms(n)

    async def deliver(self, note_id: str, note: Note) -> DeliveryResult:
        from aiogram.exceptions import TelegramAPIError, TelegramForbiddenError, TelegramRetryAfter
        from aiogram.types import ReplyParameters

        chat = chat_for(note.player)
        if chat is None:
            self.skipped += 1
            return Delivered()  # a simulated player: nobody to tell
        if note.kind == "payout":
            self.skipped += 1
            return Delivered()  # the result at settlement carries the payout (bot/announce.py)
        if await self.state.is_blocked(chat):
            self.skipped += 1
            return Delivered()
        said = note.text
        if note.kind in self.render:
            written = await self.render[note.kind](note)
            if written is None:
                self.skipped += 1
                return Delivered()
            said = written
        if await self.state.was_sent(note_id):
            self.not_repeated += 1
            log.info("note %s to chat %s: sent before (its record exists); not sent again", note_id, chat)
            await self._after(note_id, note)  # the notifier may have died before it ran
            return Delivered()  # the notifier died after the record, before the ack
        # The last checks come last: nothing but the request itself between them and Telegram.
        if await self._stale():
            return RateLimited(1)  # its token is spent unused; the next lease is fresh
        if self.local is not None and (wait := self.local.wait_s(chat, time.monotonic())) > 0:
            self.held_locally += 1
            return RateLimited(max(1, int(wait * 1000)))
        # The budget was spent by the lease this handler runs under. A 429 is not sent again
        # in place (that request would take no token): the note is deferred, and its next
        # lease takes one. A deferred serial lane's head keeps its lane and goes first again.
        try:
            quote = (ReplyParameters(message_id=note.reply_to, allow_sending_without_reply=True)
                     if note.reply_to else None)
            await self.bot.send_message(chat_id=chat, text=said,
                                        reply_markup=markup(keyboard_for(note.kind)),
                                        reply_parameters=quote, request_timeout=SEND_TIMEOUT_S)
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
            await self.state.record_sent(note_id)
        except Exception as exc:  # the ack (same Valkey) records it too; a re-run would repeat it
            log.warning("note %s sent, its send record not written (%r)", note_id, exc)
        await self._after(note_id, note)
        return Delivered()

    async def _after(self, note_id: str, note: Note) -> None:
        """Run the ``after`` hook of the note's kind: the message is out, so a failure here
        is logged and never sends it again (what the hook records is then missing: e.g. an
        accepted guess left out of its score notice, which the result still covers)."""
        hook = self.after.get(note.kind)
        if hook is None:
            return
        try:
            await hook(note)
        except Exception as exc:
            log.warning("note %s sent, its %s hook failed (%r)", note_id, note.kind, exc)
