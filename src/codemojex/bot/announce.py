"""What players hear without asking: one score notice and one result per player per round.

**Scores, batched.** The score consumer calls :meth:`ScoreBatcher.on_score` for every
scored guess of the bot's players instead of admitting one note per guess: the score is
kept in a Valkey hash per (player, round) (field: the guess id, so a re-delivery writes
the same field) and one *scores* note is admitted under an id derived from (player,
round), delayed by ``delay_ms`` on the player's lane. Every later score of that player
in that round finds the note admitted (DUPLICATE). When it is delivered the note is
written from the hash (:meth:`ScoreBatcher.render`): every guess scored by then **and told
accepted** (its "accepted" answer taken by Telegram, recorded by
:meth:`ScoreBatcher.on_accepted`), so no player reads a score of a guess before its
acceptance (docs/decisions/0046-score-notice-order.md). So a player who sends ten guesses
gets one score message for the round, not ten, and one bot token holds twice the guesses
(a reply per guess, and per player per round one score notice and one result, instead of
a reply and a score per guess).

**Never after the result.** The notice is due ``delay_ms`` after the first score; the
result, admitted at settlement with no delay, can be due sooner. Both are on the player's
serial lane, which holds one note in flight: while the notice is being written, the
result is either not admitted, waiting behind it, or out already. The notice is dropped
only in the last case (:meth:`ScoreBatcher.result_told`: the result's send record, its
note done, or its row gone from a round told long ago); the result carries the best
score anyway.

**Results at settlement.** :class:`Announcer` is an upkeep duty: each tick it reads the
rounds settled in the last ``window_s`` (PostgreSQL), and for each one not yet told
(marker ``told:<round>`` in Valkey) admits to every Telegram player who guessed in it one
*settled* note under an id derived from (player, round): their best score, their payout
or none, and the revealed secret, in their language. The marker is written after every
note is admitted, so a crash in between re-admits (DUPLICATE) and never loses a player;
the winners' own payout notes are not sent to Telegram (the result carries the payout).
"""

from __future__ import annotations

import logging

from codemojex.bot import replies
from codemojex.bot.telegram import BotState
from codemojex.domain import format_guess
from codemojex.service import Services, derive_id
from codemojex.service.codec import GuessJob, Note, encode
from codemojex.wallet import live

__all__ = ["SCORES_DELAY_MS", "TOLD_TTL_S", "Announcer", "ScoreBatcher", "scores_note_id", "settled_note_id"]

log = logging.getLogger("codemojex.bot.announce")

SCORES_DELAY_MS = 3000  # guesses sent in a burst share one notice; the first waits 3 s
SCORES_TTL_S = 24 * 3600
TOLD_TTL_S = 7 * 24 * 3600


def scores_note_id(player: str, rid: str) -> str:
    return derive_id("JOB", f"scores:{player}", rid)


def settled_note_id(player: str, rid: str) -> str:
    return derive_id("JOB", f"settled:{player}", rid)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class ScoreBatcher:
    """The bot's ``on_score`` hook and the writer of its *scores* notes."""

    def __init__(self, services: Services, state: BotState, *, delay_ms: int = SCORES_DELAY_MS) -> None:
        self.services = services
        self.state = state
        self.delay_ms = delay_ms
        self.written = 0  # notices written (this process)
        self.after_result = 0  # notices dropped: the player's result was out first
        self.unanswered = 0  # notices dropped: no scored guess answered "accepted" yet
        self.held_back = 0  # lines left out of notices written: their answers not out yet

    def _key(self, player: str, rid: str) -> str:
        return f"{self.state.prefix}scores:{player}:{rid}"

    def _told_key(self, player: str, rid: str) -> str:
        return f"{self.state.prefix}accepted:{player}:{rid}"

    async def on_accepted(self, note: Note) -> None:
        """The delivery's hook once Telegram took a guess's "accepted" answer: the guess may
        now be listed in the player's score notice."""
        if not note.guess or not note.round_id:
            return
        key = self._told_key(note.player, note.round_id)
        await self.state.connector.command("SADD", key, note.guess)
        await self.state.connector.command("EXPIRE", key, SCORES_TTL_S)

    async def result_told(self, player: str, rid: str) -> bool:
        """Whether ``player``'s result of round ``rid`` is out: Telegram took it (its send
        record), its note is done, or its note's row is gone from a round told long ago.
        A result admitted and not sent yet is not out: on the player's serial lane it waits
        behind the notice now being written."""
        result = settled_note_id(player, rid)
        if await self.state.was_sent(result):
            return True
        row = await self.services.notifications.job(result)
        if row is None:
            return bool(await self.state.connector.command("EXISTS", f"{self.state.prefix}told:{rid}"))
        return row.get("state") == b"done"

    async def on_score(self, guess_id: str, job: GuessJob, score: int) -> None:
        key = self._key(job.player, job.round_id)
        await self.state.connector.command("HSET", key, guess_id, f"{score}\t{format_guess(job.emojis)}")
        await self.state.connector.command("EXPIRE", key, SCORES_TTL_S)
        if replies.chat_for(job.player) is None:
            return  # a simulated player: nobody to tell
        note = Note(replies.KIND_SCORES, job.player, job.round_id, "", 0)
        await self.services.notifications.admit(scores_note_id(job.player, job.round_id), encode(note),
                                                lane=job.player, serial=True, delay_ms=self.delay_ms)

    async def render(self, note: Note) -> str | None:
        """The text of a *scores* note: the guesses scored and told accepted by then (None:
        none, or the player's result is out already; the note is then not sent)."""
        if await self.result_told(note.player, note.round_id):
            self.after_result += 1
            log.debug("score notice of %s in round %s dropped: the result is out", note.player, note.round_id)
            return None
        raw = await self.state.connector.command("HGETALL", self._key(note.player, note.round_id))
        told = {_text(g) for g in await self.state.connector.command(
            "SMEMBERS", self._told_key(note.player, note.round_id))}
        pairs = raw.items() if isinstance(raw, dict) else zip(raw[::2], raw[1::2], strict=True)
        lines: list[tuple[str, int]] = []
        for gid, value in pairs:
            if _text(gid) not in told:
                self.held_back += 1
                continue  # its "accepted" answer is not out yet: its score waits for the result
            score, _, guess = _text(value).partition("\t")
            lines.append((guess, int(score)))
        if not lines:
            self.unanswered += 1
            return None
        self.written += 1
        lines.sort(key=lambda line: -line[1])
        return replies.scores_text(note.round_id, lines, await self.state.language_of(note.player))


class Announcer:
    """The upkeep duty that tells every player of every settled round their result."""

    def __init__(self, services: Services, state: BotState, *, window_s: int = 3600) -> None:
        self.services = services
        self.state = state
        self.window_s = window_s
        self.told: set[str] = set()  # rounds told (this process; the Valkey marker is the record)
        self.notes = 0

    async def __call__(self) -> None:
        for rid in await live.settled_since(self.services.pool, self.window_s):
            if rid in self.told:
                continue
            marker = f"{self.state.prefix}told:{rid}"
            if not await self.state.connector.command("EXISTS", marker):
                await self.tell(rid)
                await self.state.connector.command("SET", marker, 1, "EX", TOLD_TTL_S)
            self.told.add(rid)
            if len(self.told) > 10_000:
                self.told.clear()

    async def tell(self, rid: str) -> int:
        """Admit the result of round ``rid`` to each of its Telegram players; how many."""
        secret, results = await live.round_results(self.services.pool, rid)
        players = [r for r in results if replies.chat_for(r.player) is not None]
        if not players:
            return 0
        langs = await self.state.connector.command("HMGET", self.state.lang_key, *[r.player for r in players])
        items = []
        for r, lang in zip(players, langs, strict=True):
            code = lang.decode() if isinstance(lang, bytes) else "en"
            said = replies.settled_text(rid, secret, r.best, r.guesses, r.payout, r.balance, code,
                                        spent=r.spent)
            items.append((settled_note_id(r.player, rid),
                          encode(Note(replies.KIND_SETTLED, r.player, rid, said, r.payout)), r.player))
        for verdict in await self.services.notifications.admit_many(items, serial=True):
            if isinstance(verdict, Exception):
                raise verdict  # tried again next tick; the notes admitted dedupe
        self.notes += len(items)
        log.info("round %s: result admitted for %d players", rid, len(items))
        return len(items)
