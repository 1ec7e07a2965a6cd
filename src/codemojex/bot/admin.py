"""Operators' commands, for the Telegram user ids given with ``--admins``.

=====================================  ========================================================
``/void <round>``                      void a round (its id, or the six-character tag players
                                       see): every charge refunded by compensating movements
                                       (:func:`codemojex.wallet.voids.void_round`); its players
                                       are told; a settled round is refused
``/pause`` / ``/resume``               stop opening rounds after the current one / open again
``/grant <user id> <coins>``           coins from the house to a player (a ledger movement,
                                       once per command: its ref is derived from the update);
                                       the player is told
``/player <user id>``                  what the books say of a player
=====================================  ========================================================

Anyone else sending these gets the ordinary answer to an unknown command: the commands
are not advertised. Every answer goes back to the operator's chat through the same
budget as any reply; what players are told (a void's refund, a grant) is in each
player's own language. Each command is one update, so a redelivered update is a duplicate
job (nothing runs twice); a re-run after a crash finds the void done or the grant's ref
taken, and answers the same.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection

from codemojex.bot import replies
from codemojex.bot.catalogue import text
from codemojex.bot.inbound import Command, Inbound
from codemojex.service import Services, balance, derive_id
from codemojex.service.codec import Note, encode
from codemojex.service.series import pause_series, resume_series, series_status
from codemojex.wallet import AlreadyApplied, Granted, grant, live
from codemojex.wallet.voids import void_round

__all__ = ["ADMIN_WORDS", "Admin", "parse_admins"]

log = logging.getLogger("codemojex.bot.admin")

ADMIN_WORDS = frozenset({"void", "pause", "resume", "grant", "player"})
USAGE = ("Operator commands: /void <round id or tag>, /pause, /resume, /grant <user id> <coins>, "
         "/player <user id>")


def parse_admins(value: str | None) -> frozenset[int]:
    """``"111,222"`` → {111, 222}; ValueError for anything that is not a list of ids."""
    if not value or not value.strip():
        return frozenset()
    out = set()
    for part in value.replace(" ", "").split(","):
        if not part.lstrip("-").isdigit():
            raise ValueError(f"admin ids are Telegram user ids (integers), got {part!r}")
        out.add(int(part))
    return frozenset(out)


class Admin:
    """The handler the command worker asks about a command it does not know."""

    def __init__(self, services: Services, admins: Collection[int], *, recent_rounds: int = 50,
                 language_of: Callable[[str], Awaitable[str]] | None = None) -> None:
        self.services = services
        self.admins = frozenset(admins)
        self.recent_rounds = recent_rounds
        self.language_of = language_of  # the catalogue a player reads (None: English)
        self.done = 0

    async def _lang(self, player: str) -> str:
        if self.language_of is None:
            return "en"
        try:
            return await self.language_of(player)
        except Exception as exc:  # Valkey away: the note still goes, in English
            log.info("language of %s not read (%r)", player, exc)
            return "en"

    async def _tell(self, notes: list[tuple[str, bytes, str]]) -> None:
        for verdict in await self.services.notifications.admit_many(notes, serial=True):
            if isinstance(verdict, Exception):
                raise verdict  # the command is retried; what is done stays done, the notes dedupe

    async def __call__(self, cmd: Command, inbound: Inbound) -> str | None:
        if cmd.word not in ADMIN_WORDS or inbound.user_id not in self.admins:
            return None
        log.warning("operator %s: /%s %s", inbound.user_id, cmd.word, cmd.arg)
        self.done += 1
        args = cmd.arg.split()
        if cmd.word in ("pause", "resume"):
            return await self._pause(cmd.word == "pause")
        if cmd.word == "void" and len(args) == 1:
            return await self._void(args[0], inbound)
        if cmd.word == "grant" and len(args) == 2 and args[0].isdigit() and args[1].isdigit():
            return await self._grant(int(args[0]), int(args[1]), inbound)
        if cmd.word == "player" and len(args) == 1 and args[0].isdigit():
            card = await live.player_card(self.services.pool, replies.player_id(int(args[0])))
            if card is None:
                return f"No player tg:{args[0]}."
            return "👤 " + ", ".join(f"{k} {v}" for k, v in card.items())
        return USAGE

    async def _pause(self, paused: bool) -> str:
        before = await series_status(self.services)
        if before is None:
            return "This bot runs no series."
        status = await (pause_series if paused else resume_series)(self.services)
        state = "paused: no new round opens" if paused else "running"
        already = status is not None and status.state == before.state
        return f"⏯ Series {state}" + (" (it already was)." if already else ".")

    async def _round_id(self, given: str) -> str | None:
        if len(given) > 6:
            return given
        for rid in await live.recent_rounds(self.services.pool, self.recent_rounds):
            if replies.tag(rid).upper() == given.upper():
                return rid
        return None

    async def _void(self, given: str, inbound: Inbound) -> str:
        rid = await self._round_id(given)
        if rid is None:
            return f"No recent round tagged {given!r}."
        done = await void_round(self.services.pool, rid, reason=f"operator {inbound.user_id}")
        if done.state == "unknown":
            return f"No round {rid}."
        if done.state == "settled":
            return f"Round {replies.tag(rid)} is settled (paid to its winners): it cannot be voided."
        notes = []
        for player, coins in sorted(done.refunds.items()):
            if replies.chat_for(player) is None:
                continue
            said = text(await self._lang(player), "voided", tag=replies.tag(rid), coins=coins)
            notes.append((derive_id("JOB", f"void:{player}", rid),
                          encode(Note(replies.KIND_REPLY, player, rid, said, coins)), player))
        await self._tell(notes)
        return (f"↩️ Round {replies.tag(rid)} voided: {done.refunded} coins refunded to "
                f"{len(done.refunds)} players" + (" (voided before)." if done.state == "already" else "."))

    async def _grant(self, user: int, coins: int, inbound: Inbound) -> str:
        ref = f"admin-grant:{inbound.update_id}:{inbound.chat_id}"
        player = replies.player_id(user)
        got = await grant(self.services.pool, player, coins, ref)
        if isinstance(got, Granted | AlreadyApplied):  # told once (the note's id is the grant's)
            now = got.balance if isinstance(got, Granted) else await balance(self.services, player) or 0
            said = text(await self._lang(player), "granted", coins=coins, balance=now)
            await self._tell([(derive_id("JOB", "grant-note", ref),
                               encode(Note(replies.KIND_REPLY, player, "", said, coins)), player)])
        if isinstance(got, Granted):
            return f"🎁 Granted {coins} coins to tg:{user}; their balance is {got.balance}."
        if isinstance(got, AlreadyApplied):
            return f"🎁 That grant was made before (ref {ref})."
        return f"No player tg:{user} (they must /start first)."
