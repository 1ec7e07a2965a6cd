"""Scoring on queue ``cm`` (beat 100 ms, lease 10 s: docs/architecture.md, the supervision tree).

Guarantees, however often a guess is delivered (at-least-once):

* its score is stored once (``record_score`` updates only a NULL score; a
  re-delivery finds :class:`~codemojex.wallet.AlreadyScored` and keeps the first),
  and, in the same transaction, its exact positions become the player's locks;
* one score notification is admitted on ``cm.notify`` under an id derived from
  the guess id, so a re-delivery is refused as a duplicate instead of notifying
  twice. The notification is admitted on every delivery (after the score is
  stored), so a crash between the two loses nothing.

Scoring itself is pure (:func:`codemojex.domain.score`): the same secret and guess
always give the same score. The secret is read from the cache tier, PostgreSQL on a
miss (:func:`codemojex.service.rounds.secret_of`): a guess costs the wallet no round read
while the cache answers. A cached secret is used only if its hash matches the one the
round's row keeps in PostgreSQL (read once per round per process); else PostgreSQL's.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from codemojex.domain import exact_positions, score
from codemojex.service.codec import BadPayload, GuessJob, decode_guess, note_id, score_note
from codemojex.service.context import SCORE_QUEUE, Services
from codemojex.service.rounds import secret_of
from codemojex.wallet import AlreadyScored, Scored, record_score
from echomq import Ack, Backoff, ConsumerOptions, Lease, Outcome

__all__ = ["OPTIONS", "QUEUE", "ScoreWorker"]

log = logging.getLogger("codemojex.score")

QUEUE = SCORE_QUEUE
OPTIONS = ConsumerOptions(beat_ms=100, lease_ms=10_000, concurrency=32)


class ScoreWorker:
    """The handler of ``cm``; reads each round's secret from the cache tier."""

    def __init__(self, services: Services, *,
                 on_score: Callable[[str, GuessJob, int], Awaitable[object]] | None = None) -> None:
        self.services = services
        self.scored = 0  # first-time scores stored by this worker
        # Instead of one note per guess: the bot batches a player's scores per round
        # (codemojex.bot.announce); called on every delivery, so it must be idempotent.
        self.on_score = on_score

    async def _secret(self, rid: str) -> tuple[str, ...] | None:
        return await secret_of(self.services, rid)

    async def handle(self, lease: Lease) -> Outcome:
        try:
            job = decode_guess(lease.payload)
        except BadPayload as exc:
            return Backoff(error=f"bad payload: {exc}")
        secret = await self._secret(job.round_id)
        if secret is None:
            return Backoff(error=f"unknown round {job.round_id}")
        result = score(secret, job.emojis)
        stored = await record_score(self.services.pool, lease.id, result.total,
                                    exact=exact_positions(secret, job.emojis))
        if isinstance(stored, Scored):
            self.scored += 1
        elif not isinstance(stored, AlreadyScored):
            return Backoff(error=f"unknown guess {lease.id}")  # the charge commits before admission
        if self.on_score is not None:
            await self.on_score(lease.id, job, stored.score)
            return Ack()
        # On the player's serial lane, like the bot's replies: a score never overtakes
        # the "accepted" reply to the same guess.
        await self.services.notifications.admit(
            note_id(lease.id), score_note(job.round_id, job.player, job.emojis, stored.score, lease.id),
            lane=job.player, serial=True)
        return Ack()
