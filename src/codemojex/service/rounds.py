"""Rounds on schedule: delayed jobs on ``cm-settle`` open and close them, one after another.

A *series* is ``count`` rounds of ``duration_ms`` each, ``gap_ms`` apart. Every id
in it is derived (:func:`codemojex.service.codec.derive_id`) from the series id,
so every step is idempotent under re-delivery:

* ``schedule`` records the series in PostgreSQL (its plan and its next round,
  :mod:`codemojex.wallet.series`) and admits the open job of round 0.
* The open job of round *i* runs the series' one opener (:func:`open_round`, under
  the series' row lock): it creates round *i* only if it is the series' next round and
  the series' open round (if any) is past its closing time (closing that one in the
  same transaction), so two rounds of a series are never open together and a late or
  repeated open job opens nothing twice. It then writes the round to the cache tier
  (best effort), admits the round's close job delayed to its closing time, and the
  open job of round *i+1* delayed to that time plus the gap. Both ids are derived, so
  a re-run admits nothing new (DUPLICATE). The settings come from the series' row, so
  a restart with new settings changes the rounds opened after it.
* The close job (:func:`close_and_settle`) takes the one-shot ``SET NX`` on
  ``cm:<round>:closed`` (a re-run that finds it taken reads what an earlier run left
  there), closes the round in PostgreSQL (no charge can land after that commit), and
  settles it once every charged guess is scored: the pure sealed pass pays each winner
  once (``payout:<round>:<player>`` is a unique ledger ref), so any number of runs,
  sequential or concurrent, pay identically and once. Each payout gets a notification
  with a derived id. Once settled, the marker's value becomes ``settled``; that
  decides a re-run's path: a re-delivered close job (or the reconciler) that finds
  it skips the close transaction and only reads the stored payouts to re-admit their
  notes. A marker lost with Valkey costs only that shortcut: PostgreSQL stays the truth.
* :func:`current_round` and :func:`round_of` read the cache tier first and
  PostgreSQL on a miss (:mod:`codemojex.service.cache`).
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from datetime import UTC, datetime

from codemojex.domain import draw_secret
from codemojex.domain.emoji import default_set
from codemojex.domain.errors import ConfigurationError
from codemojex.domain.payouts import Payout
from codemojex.service.codec import CloseRound, Note, OpenRound, derive_id, encode
from codemojex.service.context import Services
from codemojex.wallet import (
    NotReady,
    Round,
    amount,
    close_round,
    get_round,
    reads,
    settle_round,
)
from codemojex.wallet.series import NotYet, Opened, create_series, get_series, open_next
from echomq import EchoMQError, ids

__all__ = [
    "CLOSED_TTL_S",
    "NotYet",
    "RoundPlan",
    "close_and_settle",
    "closed_key",
    "current_round",
    "open_job_id",
    "open_round",
    "round_id",
    "round_of",
    "schedule",
    "secret_of",
]

log = logging.getLogger("codemojex.rounds")

CLOSED_TTL_S = 7 * 24 * 3600  # the one-shot marker outlives any re-delivery of the close job
SETTLED = b"settled"  # the close marker's value once the round's settlement committed


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundPlan:
    """How a series of rounds runs."""

    count: int = 1
    duration_ms: int = 60_000
    gap_ms: int = 0
    price: int = 10
    emoji_set: str = "classic"

    def __post_init__(self) -> None:
        amount(self.price, "price")  # InvalidAmount (a ConfigurationError) unless an int in range
        for name in ("count", "duration_ms", "gap_ms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigurationError(f"{name} must be an integer, got {value!r}")
        if self.count < 1 or self.duration_ms < 1 or self.gap_ms < 0:
            raise ConfigurationError("count and duration_ms must be >= 1, gap_ms >= 0")
        if default_set(self.emoji_set) is None:
            raise ConfigurationError(f"unknown emoji set {self.emoji_set!r}")


def round_id(series: str, index: int) -> str:
    """The id of round ``index`` of ``series`` (a branded ``RND`` id, derived)."""
    return derive_id("RND", f"round:{index}", series)


def closed_key(rid: str) -> str:
    """``cm:<round>:closed``: the one-shot close marker of a round."""
    return f"cm:{rid}:closed"


def open_job_id(rid: str, epoch: int = 0) -> str:
    """The id of the open job of round ``rid`` (a resume of a paused series bumps ``epoch``)."""
    return derive_id("JOB", "open" if epoch == 0 else f"open:{epoch}", rid)


async def schedule(services: Services, plan: RoundPlan, *, delay_ms: int = 0,
                   series: str | None = None) -> str:
    """Start a series (``series``: an id chosen beforehand, so it can be recorded first):
    record it in PostgreSQL (named by its id) and admit the open job of its first round.
    Returns the series id. Idempotent for a given ``series``."""
    series = series or ids.generate("SER")
    await create_series(services.pool, series, name=series, round_ms=plan.duration_ms,
                        gap_ms=plan.gap_ms, price=plan.price, rounds=plan.count, start_grant=0,
                        daily_topup=0, emoji_set=plan.emoji_set)
    job = OpenRound(series, round_id(series, 0), 0, plan.count, plan.duration_ms, plan.gap_ms,
                    plan.price, plan.emoji_set)
    await services.settlements.admit(open_job_id(job.round_id), encode(job), delay_ms=delay_ms)
    return series


def _ms_until(when: datetime) -> int:
    return max(0, int((when - datetime.now(UTC)).total_seconds() * 1000))


def _draw(set_id: str) -> tuple[str, ...]:
    emoji_set = default_set(set_id)
    if emoji_set is None:
        raise ConfigurationError(f"unknown emoji set {set_id!r}")
    return tuple(draw_secret(emoji_set))


async def open_round(services: Services, job: OpenRound) -> Round | NotYet | None:
    """Run an open job (idempotent; see the module docstring). Returns the round of the
    job's index, :class:`NotYet` while the series' open round has not reached its close
    (run the job again then), or None when there is nothing to open (a paused or finished
    series, or an index ahead of the series)."""
    if default_set(job.emoji_set) is None:
        raise ConfigurationError(f"unknown emoji set {job.emoji_set!r}")
    if await get_series(services.pool, job.series) is None:
        # An open job admitted before series lived in PostgreSQL: its plan starts the record.
        await create_series(services.pool, job.series, name=job.series, round_ms=job.duration_ms,
                            gap_ms=job.gap_ms, price=job.price, rounds=job.count or None,
                            start_grant=0, daily_topup=0, emoji_set=job.emoji_set, next_index=job.index)
    result = await open_next(services.pool, job.series, job.index, round_id=job.round_id, draw=_draw)
    if isinstance(result, NotYet):
        log.info("round %s of %s waits for the series' open round to close at %s", job.round_id,
                 job.series, result.due.isoformat())
        return result
    if not isinstance(result, Opened):
        log.info("round %s of %s not opened: the series is %s", job.round_id, job.series, result.reason)
        return None
    rnd, plan = result.round, result.series
    if services.cache is not None:
        services.cache.trust(rnd)
        services.cache.put_round(rnd, current=rnd.state == "open")
        emoji_set = default_set(rnd.emoji_set)
        if emoji_set is not None:
            services.cache.put_emoji_set(emoji_set)
    due = _ms_until(rnd.closes_at)
    await services.settlements.admit(derive_id("JOB", "close", rnd.id), encode(CloseRound(rnd.id)),
                                     delay_ms=due)
    if plan.rounds is None or job.index + 1 < plan.rounds:
        nxt = OpenRound(job.series, round_id(job.series, job.index + 1), job.index + 1, plan.rounds or 0,
                        plan.round_ms, plan.gap_ms, plan.price, plan.emoji_set)
        await services.settlements.admit(open_job_id(nxt.round_id, plan.epoch), encode(nxt),
                                         delay_ms=due + plan.gap_ms)
    if result.created:
        log.info("round %s (%d/%s of %s) open until %s", rnd.id, job.index + 1, plan.rounds or "∞",
                 job.series, rnd.closes_at.isoformat())
    return rnd


def _payout_note(rid: str, p: Payout) -> tuple[str, bytes]:
    note = Note("payout", p.player, rid, f"round {rid}: you won {p.amount} coins", p.amount)
    return derive_id("JOB", f"payout-note:{p.player}", rid), encode(note)


async def close_and_settle(services: Services, rid: str) -> tuple[Payout, ...] | NotReady | None:
    """Run a close job (idempotent). Returns the payouts, :class:`NotReady` while guesses
    are still unscored (run again later), or None for an unknown round."""
    first = await services.connector.command("SET", closed_key(rid), str(ids.generate("CLS")), "NX",
                                             "EX", CLOSED_TTL_S)
    before = None if first else await services.connector.command("GET", closed_key(rid))
    if before is not None:
        log.info("round %s: close re-run (marker %r); finishing idempotently", rid, before)
    if before != SETTLED:  # settled: the close committed long ago, only the notes are left
        state = await close_round(services.pool, rid)
        if state is None:
            return None
    result = await settle_round(services.pool, rid)
    if isinstance(result, NotReady):
        return result
    if not isinstance(result, tuple):  # RoundRefused: vanished between the two calls
        return None
    if result:
        notes = [(*_payout_note(rid, p), p.player) for p in result]  # each on its player's lane
        verdicts = await services.notifications.admit_many(notes, serial=True)
        for v in verdicts:
            if isinstance(v, Exception):
                raise v  # the close job retries; the payouts stand and the notes dedupe
    if before != SETTLED:
        with contextlib.suppress(EchoMQError):  # best effort: it only shortens a re-run
            await services.connector.command("SET", closed_key(rid), SETTLED, "XX", "KEEPTTL")
        if services.cache is not None:
            rnd = await get_round(services.pool, rid)
            if rnd is not None:
                services.cache.put_round(rnd)
    return result


async def current_round(services: Services) -> Round | None:
    """The round accepting guesses now: from the cache tier, else PostgreSQL."""
    if services.cache is not None:
        return await services.cache.current_round(services.pool)
    return await reads.current_round(services.pool)


async def secret_of(services: Services, rid: str) -> tuple[str, ...] | None:
    """Round ``rid``'s secret, from the cache tier only if it matches the hash PostgreSQL keeps
    (:meth:`~codemojex.service.cache.CacheTier.verified_round`), else from PostgreSQL. None: no round.
    The scorer reads it so; so should anything that shows or uses a secret."""
    if services.cache is not None:
        rnd = await services.cache.verified_round(services.pool, rid)
    else:
        rnd = await get_round(services.pool, rid)
    return None if rnd is None else rnd.secret


async def round_of(services: Services, rid: str) -> Round | None:
    """Round ``rid``: from the cache tier, else PostgreSQL (None: no such round)."""
    if services.cache is not None:
        return await services.cache.round(services.pool, rid)
    return await get_round(services.pool, rid)
