"""The command consumer's handler, on ``cm.commands`` (beat 100 ms, lease 10 s).

One job is one update from one chat (serial lane per chat, so a chat's commands
run in order). The handler reads the command, runs it against the service layer
(:mod:`codemojex.service`, never the wallet itself), and admits every reply as a
:class:`~codemojex.service.codec.Note` onto ``cm.notify`` on the player's serial lane,
so replies go out in order.

Idempotent under re-delivery (at-least-once):

* reply ids are derived from the command job's id (``reply:<n>``), so a re-run
  admits nothing new and nothing is said twice;
* ``/start`` is :func:`codemojex.service.start` (starting coins once per player);
* a guess is submitted under a guess id derived from the command job's id, so a
  re-run is charged once (:func:`codemojex.service.submit` with ``guess_id``);
  ``/quick`` draws its random guess from a generator seeded by the job id, so a
  re-run picks the same guess.

Every text gets an answer: unknown commands and malformed guesses get a helpful
one. Only a server failure raises (the consumer retries the job with backoff).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from codemojex.bot import replies
from codemojex.bot.catalogue import language, text
from codemojex.bot.inbound import Command, Inbound, Verb, decode_inbound, parse_command
from codemojex.domain import parse_guess
from codemojex.domain.emoji import default_set
from codemojex.domain.errors import DatabaseError, Reason
from codemojex.service import (
    Admitted,
    Services,
    balance,
    current_round,
    derive_id,
    leaderboard,
    start,
    submit,
)
from codemojex.service.codec import BadPayload, Note, encode
from codemojex.service.series import next_round
from codemojex.wallet import Granted, UnknownPlayer, live
from echomq import Ack, Backoff, ConsumerOptions, Lease, Outcome

__all__ = ["DAILY_COINS", "OPTIONS", "START_COINS", "CommandWorker", "guess_id", "reply_id"]

log = logging.getLogger("codemojex.bot.commands")

OPTIONS = ConsumerOptions(beat_ms=100, lease_ms=10_000, concurrency=16)
START_COINS = 100  # ten guesses at the default price
DAILY_COINS = 30  # three guesses a day at the default price, for players who ran out

Reply = tuple[str, str, str]  # (kind, text, round id)


def reply_id(command_job: str, n: int) -> str:
    """The id of the ``n``-th reply to command job ``command_job`` (derived)."""
    return derive_id("JOB", f"reply:{n}", command_job)


def guess_id(command_job: str) -> str:
    """The id of the guess submitted by command job ``command_job`` (derived: charged once)."""
    return derive_id("JOB", "guess", command_job)


class CommandWorker:
    """Runs one command per job. ``answer_callback`` acknowledges a button press
    (best effort: the spinner on the button stops; nothing depends on it)."""

    def __init__(self, services: Services, *, start_coins: int = START_COINS,
                 daily_coins: int = DAILY_COINS,
                 answer_callback: Callable[[str], Awaitable[object]] | None = None,
                 on_contact: Callable[[int], Awaitable[object]] | None = None,
                 on_language: Callable[[str, str], Awaitable[object]] | None = None,
                 admin: Callable[[Command, Inbound], Awaitable[str | None]] | None = None) -> None:
        self.services = services
        self.start_coins = start_coins
        self.daily_coins = daily_coins
        self.on_language = on_language  # remembers the player's catalogue for notes sent later
        self.admin = admin  # an operator's command: its answer, or None (not an operator's)
        self.answer_callback = answer_callback
        self.on_contact = on_contact  # the chat wrote to us: it is not blocking the bot
        self.handled = 0

    async def handle(self, lease: Lease) -> Outcome:
        try:
            inbound = decode_inbound(lease.payload)
        except BadPayload as exc:
            return Backoff(error=f"bad payload: {exc}")
        await self._best_effort(inbound)
        out = await self.run(parse_command(inbound.text), inbound, lease.id)
        player = replies.player_id(inbound.user_id)
        # The first reply quotes the message it answers (a button press has none); an
        # accepted guess's answer names the guess, so its delivery can record that the
        # player was told (a score notice lists only guesses told accepted: bot/announce.py).
        items = [(reply_id(lease.id, n),
                  encode(Note(kind, player, rid, text, reply_to=inbound.message_id if n == 0 else 0,
                              guess=guess_id(lease.id) if kind == replies.KIND_ACCEPTED else "")), player)
                 for n, (kind, text, rid) in enumerate(out)]
        for verdict in await self.services.notifications.admit_many(items, serial=True):
            if isinstance(verdict, Exception):
                raise verdict  # retried; replies already admitted dedupe
        self.handled += 1
        return Ack()

    async def _best_effort(self, inbound: Inbound) -> None:
        try:
            if self.answer_callback is not None and inbound.callback_id:
                await self.answer_callback(inbound.callback_id)
            if self.on_contact is not None:
                await self.on_contact(inbound.chat_id)
            if self.on_language is not None:
                await self.on_language(replies.player_id(inbound.user_id), language(inbound.lang))
        except Exception as exc:  # nothing depends on these; the command still runs
            log.debug("best-effort call failed (%r)", exc)

    async def run(self, cmd: Command, inbound: Inbound, job_id: str) -> list[Reply]:
        """The replies to ``cmd`` (the effects happen here, idempotently)."""
        services, pid, lang = self.services, replies.player_id(inbound.user_id), language(inbound.lang)
        v = cmd.verb
        if v is Verb.START:
            started = await start(services, pid, name=inbound.name, chat_id=inbound.chat_id,
                                  coins=self.start_coins)
            hello = replies.welcome(inbound.name, started.balance, started.granted, lang)
            return [(replies.KIND_REPLY, hello, ""), await self._round(lang)]
        if v is Verb.ROUND:
            return [await self._round(lang)]
        if v in (Verb.GUESS, Verb.QUICK):
            return [await self._guess(cmd, pid, job_id, lang)]
        if v is Verb.BALANCE:
            coins = await balance(services, pid)
            said = text(lang, "not_registered") if coins is None else replies.balance_text(coins, lang)
            return [(replies.KIND_REPLY, said, "")]
        if v is Verb.TOP:
            return [(replies.KIND_REPLY, await self._top(cmd.arg, pid, lang), "")]
        if v is Verb.DAILY:
            return [(replies.KIND_REPLY, await self._daily(pid, lang), "")]
        if v is Verb.HISTORY:
            rows = await live.history(services.pool, pid)
            return [(replies.KIND_REPLY, replies.history_text(rows, lang), "")]
        if v is Verb.HELP:
            return [(replies.KIND_REPLY, text(lang, "help"), "")]
        if v is Verb.UNKNOWN:
            answer = None if self.admin is None else await self.admin(cmd, inbound)
            said = answer if answer is not None else replies.unknown(cmd.word, lang)
            return [(replies.KIND_REPLY, said, "")]
        return [(replies.KIND_REPLY, text(lang, "empty"), "")]

    async def _top(self, which: str, pid: str, lang: str) -> str:
        pool = self.services.pool
        if which.lower() == "round":
            rnd = await current_round(self.services)
            rows = [] if rnd is None else await live.round_board(pool, rnd.id)
            return replies.leaderboard_text(rows, pid, lang, head="board_round")
        if which.lower() == "week":
            return replies.leaderboard_text(await live.week_board(pool), pid, lang, head="board_week")
        return replies.leaderboard_text(await leaderboard(self.services), pid, lang)

    async def _daily(self, pid: str, lang: str) -> str:
        got = await live.daily_topup(self.services.pool, pid, self.daily_coins)
        if isinstance(got, UnknownPlayer):
            return text(lang, "not_registered")
        if isinstance(got, Granted):
            return replies.daily_text(self.daily_coins, got.balance, lang)
        return replies.daily_text(None, await balance(self.services, pid) or 0, lang)

    async def _round(self, lang: str = "en") -> Reply:
        rnd = await current_round(self.services)
        emoji_set = None if rnd is None else default_set(rnd.emoji_set)
        if rnd is None or emoji_set is None:
            return (replies.KIND_REPLY, await self._no_round(lang), "")
        said = replies.round_text(rnd.id, emoji_set, rnd.guess_price, rnd.closes_at, datetime.now(UTC), lang)
        return (replies.KIND_ROUND, said, rnd.id)

    async def _no_round(self, lang: str) -> str:
        """Why no round is open, and when the next one opens (the generic answer if
        PostgreSQL cannot say just now: the answer matters more than its detail)."""
        try:
            nxt = await next_round(self.services)
        except DatabaseError as exc:
            log.info("no round open; its series not read (%r)", exc)
            return text(lang, "no_round")
        return replies.no_round_text(nxt.state, nxt.opens_at, datetime.now(UTC), lang)

    async def _guess(self, cmd: Command, pid: str, job_id: str, lang: str = "en") -> Reply:
        coins = await balance(self.services, pid)
        if coins is None:
            return (replies.KIND_REPLY, text(lang, "not_registered"), "")
        rnd = await current_round(self.services)  # the cache tier first; handed on to submit
        emoji_set = None if rnd is None else default_set(rnd.emoji_set)
        if rnd is None or emoji_set is None:
            return (replies.KIND_REPLY, await self._no_round(lang), "")
        if cmd.verb is Verb.QUICK:
            guess = " ".join(random.Random(job_id).sample(emoji_set.emojis, 6))  # same pick on a re-run
        elif not cmd.arg:
            said = replies.bad_guess("send six emojis after /guess", emoji_set, lang)
            return (replies.KIND_REPLY, said, "")
        else:
            guess = cmd.arg
        out = await submit(self.services, rnd.id, pid, guess, guess_id=guess_id(job_id),
                           rnd=rnd, explain=True)
        if isinstance(out, Admitted):
            sent = parse_guess(guess, emoji_set)  # as typed: the charged guess may keep locked positions
            said = replies.accepted(out.guess, rnd.guess_price, out.balance, lang,
                                    sent=sent if isinstance(sent, tuple) else None)
            return (replies.KIND_ACCEPTED, said, rnd.id)
        if out.reason is Reason.BAD_GUESS:
            return (replies.KIND_REPLY, replies.bad_guess(out.detail, emoji_set, lang), rnd.id)
        if out.reason is Reason.INSUFFICIENT:
            return (replies.KIND_REPLY, replies.insufficient(coins, rnd.guess_price, lang), rnd.id)
        if out.reason is Reason.NO_ROUND:
            return (replies.KIND_REPLY, await self._no_round(lang), "")
        if out.reason is Reason.UNAVAILABLE:  # PostgreSQL out past the retry bound: nothing decided
            return (replies.KIND_REPLY, text(lang, "unavailable"), rnd.id)
        return (replies.KIND_REPLY, text(lang, "closed"), rnd.id)
