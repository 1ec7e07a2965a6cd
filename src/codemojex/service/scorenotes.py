"""Score notes per player per round: at most one waiting note per (player, round), carrying
every score not told yet (docs/decisions/0049-score-notes-per-player-round.md).

A note on ``cm.notify`` is a pointer, not a text: *tell ``player`` their untold scores of
``round``*. The notification worker reads those scores from PostgreSQL when it delivers the
note (scored, ``notified_at`` NULL), lists them all in one message and stamps them told
after the delivery (:class:`codemojex.workers.notify.NotifyWorker`). So a score is told by
whichever note of its (player, round) is delivered first after its commit, and a burst of
guesses costs one job and one message.

The notes are admitted with the queue's **debounce** on the dedupe key ``told:<player>:<round>``
and on the player's serial lane (``docs/protocol.md``, "Dedupe windows"): while the key's
holder waits (delayed or pending) an admission only replaces it (``REPLACED``: nothing new is
written); a holder that runs or ended is left alone and a new note is admitted behind it on
the lane (it runs when the holder is done). That is what makes the read at delivery enough:
a score committed before an admission is read by a note that starts after that admission.

**Promptly, and few.** A new note is due ``delay_ms`` after the score that admitted it; a
later score keeps that due time (it passes the time left, so the debounce does not push the
note back), and while the note this process admitted is due in the future a score needs no
admission at all: the note cannot have started (a delayed job is not claimed before its due
time, which the server counts from after the admission was sent), so it will read the score.
A holder whose due time passed (being delivered, or late) gets an admission again.

**Ids.** A note admitted by the score of guess ``g`` has the id ``note_id(g)``; the
re-delivery of a guess whose note was admitted finds that id (DUPLICATE: that note reads
the score, it was admitted after its commit) or a waiting holder (REPLACED).

**Repairs.** A crash between a score's commit and its admission loses nothing: the guess's
job is delivered again and admits again, the next note of the (player, round) reads every
untold score anyway, and the reconciler admits a note, due at once, for each (player, round)
with a score untold ``min_age_s`` after it was stored (:mod:`codemojex.service.reconcile`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

from codemojex.domain import format_guess
from codemojex.infra.groups import GroupCommit
from codemojex.service.codec import Note, encode, note_id
from echomq import AsyncQueue, EchoMQError, Verdict

__all__ = ["NOTE_DELAY_MS", "NOTE_WINDOW_MS", "ScoreNotes", "scores_key", "scores_note", "scores_text"]

NOTE_DELAY_MS = 500  # a score is told within about half a second; a burst in that time is one message
NOTE_WINDOW_MS = 60_000  # the dedupe key outlives its holder's wait by this (a lost key costs a note)
_KEPT = 100_000  # (player, round) holders a process remembers (cleared past that)

Item = tuple[str, str, str, int]  # (player, round, guess id, delay ms)


def scores_key(player: str, rid: str) -> str:
    """The dedupe key of ``player``'s score notes of round ``rid``."""
    return f"told:{player}:{rid}"


def scores_note(player: str, rid: str) -> bytes:
    """The payload of a score note: *tell ``player`` their untold scores of ``rid``*."""
    return encode(Note("score", player, rid, ""))


def scores_text(lines: Sequence[tuple[tuple[str, ...], int]]) -> str:
    """The text of one message telling ``(emojis, score)`` of each guess, in their order."""
    return "; ".join(f"{format_guess(emojis)} scored {total}/600" for emojis, total in lines)


class ScoreNotes:
    """Admits the score notes of ``queue`` (the module docstring). :meth:`scored` after each
    score's commit; :meth:`admit` for notes due at once (the reconciler's repairs)."""

    def __init__(self, queue: AsyncQueue, *, delay_ms: int = NOTE_DELAY_MS) -> None:
        if delay_ms < 0:
            raise ValueError("delay_ms must be >= 0")
        self.queue = queue
        self.delay_ms = delay_ms
        self.window_ms = delay_ms + NOTE_WINDOW_MS  # the key outlives its holder's wait
        self.holders: dict[tuple[str, str], tuple[str, float]] = {}  # -> (note id, due, monotonic s)
        self.group: GroupCommit[Item, Verdict | EchoMQError] = GroupCommit(self._flush, max_items=256,
                                                                           flushes=2)
        self.skipped = 0  # scores whose waiting note needed no admission
        self.admissions = 0  # admissions asked for (a holder changed under one is asked again inside)

    async def scored(self, player: str, rid: str, guess_id: str) -> None:
        """The score of ``guess_id`` is committed: a note of (``player``, ``rid``) will tell it.
        Raises the queue's error (the caller's attempt is retried; the score stands)."""
        held = self.holders.get((player, rid))
        if held is not None and time.monotonic() < held[1]:
            self.skipped += 1  # the note this process admitted waits: it will read the score
            return
        verdict = await self.group.call((player, rid, guess_id, self.delay_ms))
        if isinstance(verdict, EchoMQError):
            raise verdict

    async def admit(self, items: Sequence[tuple[str, str, str]], *,
                    delay_ms: int = 0) -> list[Verdict | EchoMQError]:
        """A note of each ``(player, round, guess id)`` due in ``delay_ms`` (a waiting one is
        moved to it), in one pipelined round: the verdicts in order."""
        return await self._flush([(p, r, g, delay_ms) for p, r, g in items])

    def _hold(self, key: tuple[str, str], holder: str, due: float) -> None:
        if len(self.holders) >= _KEPT and key not in self.holders:
            self.holders.clear()
        self.holders[key] = (holder, due)

    async def _flush(self, items: list[Item]) -> list[Verdict | EchoMQError]:
        sent = time.monotonic()
        held_items, delays = [], []
        for player, rid, gid, delay in items:
            held = self.holders.get((player, rid))
            holder = held[0] if held else ""
            if delay and held is not None and held[1] > sent:
                delay = max(1, math.ceil((held[1] - sent) * 1000))  # keep its due time (never sooner)
            delays.append(delay)
            held_items.append((note_id(gid), scores_note(player, rid), scores_key(player, rid),
                               player, delay, holder))
        replies = await self.queue.admission.admit_held_many(held_items, dedupe_ms=self.window_ms)
        self.admissions += len(items)
        out: list[Verdict | EchoMQError] = []
        for (player, rid, _, _), delay, reply in zip(items, delays, replies, strict=True):
            if isinstance(reply, EchoMQError):
                out.append(reply)
                continue
            verdict, who = reply
            out.append(verdict)
            if verdict in (Verdict.ENQUEUED, Verdict.REPLACED):
                self._hold((player, rid), who, sent + delay / 1000)
        return out
