"""Scoring on queue ``cm`` (seed 003: beat 100 ms, lease 10 s).

Guarantees, however often a guess is delivered (at-least-once):

* its score is stored once (``record_score`` updates only a NULL score; a
  re-delivery finds :class:`~codemojex.wallet.AlreadyScored` and keeps the first),
  and, in the same transaction, its exact positions become the player's locks;
* one score notification is admitted on ``cm.notify`` under an id derived from
  the guess id, so a re-delivery is refused as a duplicate instead of notifying
  twice. The notification is admitted on every delivery (after the score is
  stored), so a crash between the two loses nothing.

Scoring itself is pure (:func:`codemojex.domain.score`): the same secret and guess
always give the same score.
"""

from __future__ import annotations

import logging

from codemojex.domain import exact_positions, format_guess, score
from codemojex.service.codec import BadPayload, Note, decode_guess, derive_id, encode
from codemojex.service.context import SCORE_QUEUE, Services
from codemojex.wallet import AlreadyScored, Scored, get_round, record_score
from echomq import Ack, Backoff, ConsumerOptions, Lease, Outcome

__all__ = ["OPTIONS", "QUEUE", "ScoreWorker", "note_id", "score_note"]

log = logging.getLogger("codemojex.score")

QUEUE = SCORE_QUEUE
OPTIONS = ConsumerOptions(beat_ms=100, lease_ms=10_000, concurrency=32)


def note_id(guess_id: str) -> str:
    """The id of the score notification of ``guess_id`` (derived: one per guess)."""
    return derive_id("JOB", "score-note", guess_id)


def score_note(round_id: str, player: str, emojis: tuple[str, ...], total: int) -> bytes:
    """The payload of a guess's score notification."""
    return encode(Note("score", player, round_id, f"{format_guess(emojis)} scored {total}/600", total))


class ScoreWorker:
    """The handler of ``cm``; keeps round secrets in memory (they never change)."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self._secrets: dict[str, tuple[str, ...]] = {}
        self.scored = 0  # first-time scores stored by this worker

    async def _secret(self, rid: str) -> tuple[str, ...] | None:
        secret = self._secrets.get(rid)
        if secret is None:
            rnd = await get_round(self.services.pool, rid)
            if rnd is None:
                return None
            secret = self._secrets[rid] = rnd.secret
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
        stored = await record_score(self.services.pool, lease.id, result.total,
                                    exact=exact_positions(secret, job.emojis))
        if isinstance(stored, Scored):
            self.scored += 1
        elif not isinstance(stored, AlreadyScored):
            return Backoff(error=f"unknown guess {lease.id}")  # the charge commits before admission
        # On the player's serial lane, like the bot's replies: a score never overtakes
        # the "accepted" reply to the same guess.
        await self.services.notifications.admit(
            note_id(lease.id), score_note(job.round_id, job.player, job.emojis, stored.score),
            lane=job.player, serial=True)
        return Ack()
