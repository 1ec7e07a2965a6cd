"""Scoring on queue ``cm`` (beat 250 ms, lease 10 s: docs/architecture.md, the supervision tree).

Guarantees, however often a guess is delivered (at-least-once):

* its score is stored once (``record_score`` updates only a NULL score; a
  re-delivery finds :class:`~codemojex.wallet.AlreadyScored` and keeps the first),
  and, in the same transaction, its exact positions become the player's locks;
* its score is told by the player's score note of the round (at most one waiting per
  player and round, carrying every score not told yet: :mod:`codemojex.service.scorenotes`,
  decision 0049), whose admission follows the score's commit on every delivery, so a
  crash between the two loses nothing and a re-delivery tells nothing twice (the note
  reads the untold scores when it is delivered and stamps what it told).

Scoring itself is pure (:func:`codemojex.domain.score`): the same secret and guess
always give the same score. The secret is read from the cache tier, PostgreSQL on a
miss (:func:`codemojex.service.rounds.secret_of`), once per round per worker (a round's
secret never changes; the worker keeps it): a guess costs no round read at all. A cached
secret is used only if its hash matches the one the
round's row keeps in PostgreSQL (read once per round per process); else PostgreSQL's.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from codemojex.domain import exact_positions, score
from codemojex.infra.groups import GroupCommit
from codemojex.service.codec import BadPayload, GuessJob, decode_guess
from codemojex.service.context import SCORE_QUEUE, Services
from codemojex.service.rounds import secret_of
from codemojex.service.scorenotes import NOTE_DELAY_MS, ScoreNotes
from codemojex.wallet import AlreadyScored, Scored
from codemojex.wallet.batch import record_scores
from codemojex.wallet.results import UnknownGuess
from echomq import Ack, Backoff, ConsumerOptions, Lease, Outcome

__all__ = ["OPTIONS", "QUEUE", "ScoreWorker"]

log = logging.getLogger("codemojex.score")

QUEUE = SCORE_QUEUE
# Handlers at once: a flush of the consumer stores its scores in one transaction and admits
# their notes in one pipeline (the groups below), so the more at once the fewer per guess. A
# beat extends every lease held (one script call per 256 leases, decision 0055): 250 ms (40
# beats per 10 s lease) spends fewer on it.
OPTIONS = ConsumerOptions(beat_ms=250, lease_ms=10_000, concurrency=256)
_SECRETS_KEPT = 1024  # rounds whose secret a worker keeps in memory (a few open at once)


class ScoreWorker:
    """The handler of ``cm``; reads each round's secret from the cache tier. ``note_delay_ms``:
    how long a player's score note waits for more scores to tell (the first score's wait)."""

    def __init__(self, services: Services, *,
                 on_score: Callable[[str, GuessJob, int], Awaitable[object]] | None = None,
                 note_delay_ms: int = NOTE_DELAY_MS) -> None:
        self.services = services
        self.scored = 0  # first-time scores stored by this worker
        # Instead of one note per guess: the bot batches a player's scores per round
        # (codemojex.bot.announce); called on every delivery, so it must be idempotent.
        self.on_score = on_score
        self._secrets: dict[str, tuple[str, ...]] = {}  # round id -> its checked secret
        # The handlers running at once (one flush of the consumer) store their scores in one
        # transaction (codemojex.infra.groups) and admit the notes they need in one pipeline.
        self.stores: GroupCommit[tuple[str, int, dict[int, str]], Scored | AlreadyScored | UnknownGuess] = \
            GroupCommit(lambda items: record_scores(services.pool, items), max_items=256, flushes=2)
        self.notes = ScoreNotes(services.notifications, delay_ms=note_delay_ms)

    async def _secret(self, rid: str) -> tuple[str, ...] | None:
        # A round's secret never changes: once read (and checked against PostgreSQL's hash
        # by secret_of), this worker keeps it, so a guess costs no read at all.
        secret = self._secrets.get(rid)
        if secret is None:
            secret = await secret_of(self.services, rid)
            if secret is not None:
                if len(self._secrets) >= _SECRETS_KEPT:
                    self._secrets.clear()
                self._secrets[rid] = secret
        return secret

    async def handle(self, lease: Lease) -> Outcome:
        try:
            job = decode_guess(lease.payload)
        except BadPayload as exc:
            return Backoff(error=f"bad payload: {exc}")
        secret = await self._secret(job.round_id)
        if secret is None:
            return Backoff(error=f"unknown round {job.round_id}")
        result = score(secret, job.emojis)
        stored = await self.stores.call((lease.id, result.total, dict(exact_positions(secret, job.emojis))))
        if isinstance(stored, Scored):
            self.scored += 1
        elif not isinstance(stored, AlreadyScored):
            return Backoff(error=f"unknown guess {lease.id}")  # the charge commits before admission
        if self.on_score is not None:
            await self.on_score(lease.id, job, stored.score)
            return Ack()
        # On the player's serial lane, like the bot's replies: a score never overtakes
        # the "accepted" reply to the same guess. A queue error is raised: the attempt is
        # retried, the score stands, the note is admitted (or found waiting) again.
        await self.notes.scored(job.player, job.round_id, lease.id)
        return Ack()
