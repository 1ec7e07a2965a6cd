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
from codemojex.bot.inbound import Command, Inbound, Verb, decode_inbound, parse_command
from codemojex.domain.emoji import default_set
from codemojex.errors import Reason
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
from echomq import Ack, Backoff, ConsumerOptions, Lease, Outcome

__all__ = ["OPTIONS", "START_COINS", "CommandWorker", "reply_id"]

log = logging.getLogger("codemojex.bot.commands")

OPTIONS = ConsumerOptions(beat_ms=100, lease_ms=10_000, concurrency=16)
START_COINS = 100  # ten guesses at the default price

Reply = tuple[str, str, str]  # (kind, text, round id)


def reply_id(command_job: str, n: int) -> str:
    """The id of the ``n``-th reply to command job ``command_job`` (derived)."""
    return derive_id("JOB", f"reply:{n}", command_job)


class CommandWorker:
    """Runs one command per job. ``answer_callback`` acknowledges a button press
    (best effort: the spinner on the button stops; nothing depends on it)."""

    def __init__(self, services: Services, *, start_coins: int = START_COINS,
                 answer_callback: Callable[[str], Awaitable[object]] | None = None,
                 on_contact: Callable[[int], Awaitable[object]] | None = None) -> None:
        self.services = services
        self.start_coins = start_coins
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
        items = [(reply_id(lease.id, n), encode(Note(kind, player, rid, text)), player)
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
        except Exception as exc:  # nothing depends on these; the command still runs
            log.debug("best-effort call failed (%r)", exc)

    async def run(self, cmd: Command, inbound: Inbound, job_id: str) -> list[Reply]:
        """The replies to ``cmd`` (the effects happen here, idempotently)."""
        services, pid = self.services, replies.player_id(inbound.user_id)
        v = cmd.verb
        if v is Verb.START:
            started = await start(services, pid, name=inbound.name, chat_id=inbound.chat_id,
                                  coins=self.start_coins)
            return [(replies.KIND_REPLY, replies.welcome(inbound.name, started.balance, started.granted), ""),
                    await self._round()]
        if v is Verb.ROUND:
            return [await self._round()]
        if v in (Verb.GUESS, Verb.QUICK):
            return [await self._guess(cmd, pid, job_id)]
        if v is Verb.BALANCE:
            coins = await balance(services, pid)
            text = replies.NOT_REGISTERED if coins is None else replies.balance_text(coins)
            return [(replies.KIND_REPLY, text, "")]
        if v is Verb.TOP:
            return [(replies.KIND_REPLY, replies.leaderboard_text(await leaderboard(services), pid), "")]
        if v is Verb.HELP:
            return [(replies.KIND_REPLY, replies.HELP, "")]
        if v is Verb.UNKNOWN:
            return [(replies.KIND_REPLY, replies.unknown(cmd.word), "")]
        return [(replies.KIND_REPLY, replies.EMPTY, "")]

    async def _round(self) -> Reply:
        rnd = await current_round(self.services)
        emoji_set = None if rnd is None else default_set(rnd.emoji_set)
        if rnd is None or emoji_set is None:
            return (replies.KIND_REPLY, replies.NO_ROUND, "")
        text = replies.round_text(rnd.id, emoji_set, rnd.guess_price, rnd.closes_at, datetime.now(UTC))
        return (replies.KIND_ROUND, text, rnd.id)

    async def _guess(self, cmd: Command, pid: str, job_id: str) -> Reply:
        coins = await balance(self.services, pid)
        if coins is None:
            return (replies.KIND_REPLY, replies.NOT_REGISTERED, "")
        rnd = await current_round(self.services)  # the cache tier first; handed on to submit
        emoji_set = None if rnd is None else default_set(rnd.emoji_set)
        if rnd is None or emoji_set is None:
            return (replies.KIND_REPLY, replies.NO_ROUND, "")
        if cmd.verb is Verb.QUICK:
            text = " ".join(random.Random(job_id).sample(emoji_set.emojis, 6))  # same pick on a re-run
        elif not cmd.arg:
            return (replies.KIND_REPLY, replies.bad_guess("send six emojis after /guess", emoji_set), "")
        else:
            text = cmd.arg
        out = await submit(self.services, rnd.id, pid, text, guess_id=derive_id("JOB", "guess", job_id),
                           rnd=rnd, explain=True)
        if isinstance(out, Admitted):
            return (replies.KIND_REPLY, replies.accepted(out.guess, rnd.guess_price, out.balance), rnd.id)
        if out.reason is Reason.BAD_GUESS:
            return (replies.KIND_REPLY, replies.bad_guess(out.detail, emoji_set), rnd.id)
        if out.reason is Reason.INSUFFICIENT:
            return (replies.KIND_REPLY, replies.insufficient(coins, rnd.guess_price), rnd.id)
        if out.reason is Reason.NO_ROUND:
            return (replies.KIND_REPLY, replies.NO_ROUND, "")
        if out.reason is Reason.UNAVAILABLE:  # PostgreSQL out past the retry bound: nothing decided
            return (replies.KIND_REPLY, replies.UNAVAILABLE, rnd.id)
        return (replies.KIND_REPLY, replies.CLOSED, rnd.id)
