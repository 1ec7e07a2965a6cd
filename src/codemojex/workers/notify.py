"""Notifications on queue ``cm.notify`` (beat 50 ms, lease 15 s).

A :class:`Delivery` sends one notification and classifies the result; the
handler maps it to the queue's outcomes: :class:`Delivered` → ack,
:class:`RateLimited` → defer by ``retry_after_ms`` (Telegram's 429, no failure
counted), :class:`Failed` → backoff (a failure, retried with growing delay, dead
at the attempt limit). Delivery is at-least-once: a crash between sending and
acking sends again, so deliveries should be cheap to repeat.

**Score notes** (kind ``score`` without a guess: :mod:`codemojex.service.scorenotes`) are
written here, when they are delivered: the player's scores of the round not told yet are
read from PostgreSQL (one read for the notes delivered together), listed in one message,
and stamped told (``notified_at``) once it is delivered; a note that finds nothing untold
sends nothing. So a re-delivery of a note whose message went out and was stamped tells
nothing again, and one that went out but was not stamped (a crash in between) tells the
same scores again: at-least-once, never lost. A score note of one guess (``guess`` set:
admitted before decision 0049) is delivered as it is and stamps its guess.

:class:`ConsoleDelivery` prints; the Telegram delivery is a later issue and only
has to implement :class:`Delivery`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol

from psycopg_pool import AsyncConnectionPool

from codemojex.domain.errors import DatabaseError
from codemojex.infra.groups import GroupCommit
from codemojex.service.codec import BadPayload, Note, decode_note
from codemojex.service.context import NOTIFY_QUEUE
from codemojex.service.scorenotes import scores_text
from codemojex.wallet.batch import Untold, mark_notified_many, untold_scores
from echomq import Ack, Backoff, ConsumerOptions, Defer, Lease, Outcome

__all__ = [
    "CURRENT_LEASE",
    "LOCAL_OPTIONS",
    "OPTIONS",
    "QUEUE",
    "ConsoleDelivery",
    "Delivered",
    "Delivery",
    "Failed",
    "NotifyWorker",
    "RateLimited",
]

QUEUE = NOTIFY_QUEUE
OPTIONS = ConsumerOptions(beat_ms=50, lease_ms=15_000, concurrency=16)
# Deliveries that cost nothing outside (the console of play and bench): as many at once as
# the scorer produces, so a flush of notes is delivered and stamped as one group; nothing to
# pace, so a 250 ms beat (fewer beats; each extends every lease held in one script call per
# 256 leases, decision 0055).
LOCAL_OPTIONS = ConsumerOptions(beat_ms=250, lease_ms=15_000, concurrency=256)
# The lease a delivery runs under (each handler runs in its own task, so its own value):
# the Telegram delivery reads its grant time to refuse sending on a lease gone stale.
CURRENT_LEASE: ContextVar[Lease | None] = ContextVar("codemojex_notify_lease", default=None)


@dataclass(frozen=True, slots=True)
class Delivered:
    pass


@dataclass(frozen=True, slots=True)
class RateLimited:
    retry_after_ms: int


@dataclass(frozen=True, slots=True)
class Failed:
    """A failure that may pass. ``retry_ms``: the delivery's own backoff; None leaves it to
    the consumer's policy (which grows with the attempt, and deferrals take attempts too)."""

    error: str
    retry_ms: int | None = None


DeliveryResult = Delivered | RateLimited | Failed


class Delivery(Protocol):
    async def deliver(self, note_id: str, note: Note) -> DeliveryResult: ...


class ConsoleDelivery:
    """Prints each notification of a kind in ``kinds`` (all when None) with ``write``; counts all."""

    def __init__(self, write: Callable[[str], None] | None = print,
                 kinds: Collection[str] | None = None) -> None:
        self.write = write
        self.kinds = None if kinds is None else frozenset(kinds)
        self.counts: Counter[str] = Counter()
        self.seen: dict[str, str] = {}  # id -> kind of every note delivered (a re-delivery repeats an id)

    async def deliver(self, note_id: str, note: Note) -> DeliveryResult:
        self.counts[note.kind] += 1
        self.seen[note_id] = note.kind
        if self.write is not None and (self.kinds is None or note.kind in self.kinds):
            self.write(f"[{note.kind}] {note.player}: {note.text}")
        return Delivered()

    def distinct(self, kind: str) -> int:
        """How many different notifications of ``kind`` were delivered."""
        return sum(1 for k in self.seen.values() if k == kind)


class NotifyWorker:
    """``pool``: stamp each delivered score note on its guess (``notified_at``), the record
    the run's audit counts; a stamp that fails past the wallet's bound backs off, and the
    note is sent again (delivery is at-least-once anyway)."""

    def __init__(self, delivery: Delivery, *, pool: AsyncConnectionPool | None = None) -> None:
        self.delivery = delivery
        self.pool = pool
        # The stamps of the notes delivered together go in one transaction, their reads in one.
        self.stamps: GroupCommit[tuple[str, ...], None] = GroupCommit(self._stamp, max_items=256, flushes=2)
        self.untold: GroupCommit[tuple[str, str], list[Untold]] = GroupCommit(self._untold, max_items=256,
                                                                               flushes=2)
        self.told = 0  # score notes delivered with their scores (messages)
        self.empty = 0  # score notes that found every score of theirs told already

    async def _stamp(self, groups: list[tuple[str, ...]]) -> list[None]:
        assert self.pool is not None
        await mark_notified_many(self.pool, [g for group in groups for g in group])
        return [None] * len(groups)

    async def _untold(self, pairs: list[tuple[str, str]]) -> list[list[Untold]]:
        assert self.pool is not None
        return await untold_scores(self.pool, pairs)

    async def handle(self, lease: Lease) -> Outcome:
        try:
            note = decode_note(lease.payload)
        except BadPayload as exc:
            return Backoff(error=f"bad payload: {exc}")
        stamp: tuple[str, ...] = ()
        if self.pool is not None and note.kind == "score":
            if note.guess:
                stamp = (note.guess,)
            else:  # a player's untold scores of a round, written now
                try:
                    untold = await self.untold.call((note.player, note.round_id))
                except DatabaseError as exc:
                    return Backoff(error=f"untold scores not read: {exc}")
                if not untold:
                    self.empty += 1
                    return Ack()  # every score of it was told by an earlier note
                stamp = tuple(u.guess_id for u in untold)
                note = Note("score", note.player, note.round_id,
                            scores_text([(u.emojis, u.score) for u in untold]), max(u.score for u in untold))
        token = CURRENT_LEASE.set(lease)
        try:
            result = await self.delivery.deliver(lease.id, note)
        finally:
            CURRENT_LEASE.reset(token)
        if isinstance(result, Delivered):
            if stamp:
                try:
                    await self.stamps.call(stamp)
                except DatabaseError as exc:
                    return Backoff(error=f"delivered, not stamped: {exc}")
                self.told += not note.guess
            return Ack()
        if isinstance(result, RateLimited):
            return Defer(delay_ms=max(1, result.retry_after_ms))
        return Backoff(error=result.error, delay_ms=result.retry_ms)
