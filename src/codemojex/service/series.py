"""One series of rounds, whatever happens (issue 25, item 2): the bot's rounds.

The series lives in PostgreSQL (:mod:`codemojex.wallet.series`: its id, its settings,
its next round). :func:`start_series` is what the bot (or any starter) calls on every
start: it finds the live series of that name or creates it (two starters at once find
one series: a unique index on live names), stores the settings given (they apply to
the rounds opened from then on; :attr:`SeriesStatus.changed` names what changed), and
admits the open job of the series' next round under its derived id (a DUPLICATE while
the queue holds it; if a crash or a failover lost it, this admits it again). So a
restart, whenever it happens, resumes the one series; the opener's row lock and the
unique index on open rounds mean no late or repeated open job opens a second round.

:func:`kick` is that last step alone; the reconciler runs it on every running series
each pass (:mod:`codemojex.service.reconcile`), so a lost open job never stops the rounds.

Settings (:class:`SeriesSettings`) are integers in range, checked before anything is
written; a bad one raises :class:`~codemojex.domain.errors.InvalidSetting` naming it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta

from codemojex.domain.emoji import default_set
from codemojex.domain.errors import InvalidAmount, InvalidSetting
from codemojex.service.codec import OpenRound, encode
from codemojex.service.context import Services
from codemojex.service.rounds import RoundPlan, open_job_id, round_id
from codemojex.wallet import amount, get_round
from codemojex.wallet.series import (
    SeriesRow,
    create_series,
    latest_series,
    live_series,
    set_series_settings,
    set_series_state,
)
from echomq import Verdict, ids

__all__ = [
    "MAIN",
    "NextRound",
    "SeriesSettings",
    "SeriesStatus",
    "ensure_rounds",
    "kick",
    "next_round",
    "pause_series",
    "resume_series",
    "series_status",
    "start_series",
]

log = logging.getLogger("codemojex.series")

MAIN = "main"  # the bot's series
MIN_ROUND_MS = 100  # tests run rounds of a fraction of a second; players get minutes
MAX_ROUND_MS = 7 * 24 * 3600 * 1000  # a week
MAX_GAP_MS = 24 * 3600 * 1000
MAX_ROUNDS = 1_000_000


def _integer(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidSetting(name, f"{name} must be an integer, got {value!r}")
    if not low <= value <= high:
        raise InvalidSetting(name, f"{name} must be in {low}..{high}, got {value}")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class SeriesSettings:
    """How the rounds of a series run. ``rounds`` None: unlimited. ``start_grant``: the coins
    a new player gets; ``daily_topup``: the coins a player may claim once a day (0: none)."""

    round_ms: int = 300_000
    price: int = 10
    rounds: int | None = None
    start_grant: int = 100
    daily_topup: int = 0
    gap_ms: int = 0
    emoji_set: str = "classic"

    def __post_init__(self) -> None:
        _integer("round_ms", self.round_ms, MIN_ROUND_MS, MAX_ROUND_MS)
        _integer("gap_ms", self.gap_ms, 0, MAX_GAP_MS)
        if self.rounds is not None:
            _integer("rounds", self.rounds, 1, MAX_ROUNDS)
        for name, zero in (("price", False), ("start_grant", True), ("daily_topup", True)):
            try:
                amount(getattr(self, name), name, zero=zero)
            except InvalidAmount as exc:
                raise InvalidSetting(name, str(exc)) from None
        if not isinstance(self.emoji_set, str) or default_set(self.emoji_set) is None:
            raise InvalidSetting("emoji_set", f"emoji_set: unknown emoji set {self.emoji_set!r}")

    @classmethod
    def of(cls, row: SeriesRow) -> SeriesSettings:
        return cls(round_ms=row.round_ms, price=row.price, rounds=row.rounds, start_grant=row.start_grant,
                   daily_topup=row.daily_topup, gap_ms=row.gap_ms, emoji_set=row.emoji_set)



@dataclass(frozen=True, slots=True)
class SeriesStatus:
    """A live series as PostgreSQL holds it: ``next_index`` is the round it opens next.
    ``created``: by this call; ``changed``: the settings this call stored anew (an
    ``emoji_set`` given differently is kept as the series had it: a series has one set)."""

    id: str
    name: str
    state: str
    settings: SeriesSettings
    next_index: int
    epoch: int
    created: bool = False
    changed: tuple[str, ...] = ()

    @classmethod
    def of(cls, row: SeriesRow, *, created: bool = False, changed: tuple[str, ...] = ()) -> SeriesStatus:
        return cls(row.id, row.name, row.state, SeriesSettings.of(row), row.next_index, row.epoch,
                   created, changed)


def _ms_until(when: datetime) -> int:
    return max(0, int((when - datetime.now(UTC)).total_seconds() * 1000))


async def kick(services: Services, row: SeriesRow) -> bool:
    """Admit the open job of the series' next round (its derived id: a DUPLICATE while the
    queue holds it), due when the round before it closes plus the gap. True if it was
    missing and is admitted now. A series that is not running is left alone."""
    if row.state != "running" or (row.rounds is not None and row.next_index >= row.rounds):
        return False
    rid = round_id(row.id, row.next_index)
    delay = 0
    if row.next_index > 0:
        before = await get_round(services.pool, round_id(row.id, row.next_index - 1))
        if before is not None:
            delay = _ms_until(before.closes_at + timedelta(milliseconds=row.gap_ms))
    job = OpenRound(row.id, rid, row.next_index, row.rounds or 0, row.round_ms, row.gap_ms, row.price,
                    row.emoji_set)
    verdict = await services.settlements.admit(open_job_id(rid, row.epoch), encode(job), delay_ms=delay)
    if verdict is Verdict.ENQUEUED:
        log.info("series %s: the open job of round %d admitted (due in %d ms)", row.id, row.next_index,
                 delay)
        return True
    return False


async def start_series(services: Services, settings: SeriesSettings, *, name: str = MAIN) -> SeriesStatus:
    """Resume the live series ``name`` (or start it): see the module docstring. Idempotent."""
    if not isinstance(settings, SeriesSettings):
        raise InvalidSetting("settings", f"settings must be SeriesSettings, got {type(settings).__name__}")
    row, created = await create_series(
        services.pool, ids.generate("SER"), name=name, round_ms=settings.round_ms, gap_ms=settings.gap_ms,
        price=settings.price, rounds=settings.rounds, start_grant=settings.start_grant,
        daily_topup=settings.daily_topup, emoji_set=settings.emoji_set)
    changed: tuple[str, ...] = ()
    if not created:
        had = SeriesSettings.of(row)
        changed = tuple(f.name for f in fields(SeriesSettings)
                        if f.name != "emoji_set" and getattr(had, f.name) != getattr(settings, f.name))
        if changed:
            updated = await set_series_settings(
                services.pool, row.id, round_ms=settings.round_ms, gap_ms=settings.gap_ms,
                price=settings.price, rounds=settings.rounds, start_grant=settings.start_grant,
                daily_topup=settings.daily_topup)
            row = updated or row
            log.warning("series %s: settings changed (%s); they apply from round %d", row.id,
                        ", ".join(changed), row.next_index + 1)
    await kick(services, row)
    return SeriesStatus.of(row, created=created, changed=changed)


async def series_status(services: Services, name: str = MAIN) -> SeriesStatus | None:
    """The live series ``name`` (running or paused), or None."""
    row = await live_series(services.pool, name)
    return None if row is None else SeriesStatus.of(row)


@dataclass(frozen=True, slots=True)
class NextRound:
    """What comes after the rounds so far, for a player who finds none open: ``running``
    (the next round opens at ``opens_at``; None: not known yet), ``paused`` (by the
    operators), ``over`` (the series opened its last round) or ``none`` (no series)."""

    state: str
    opens_at: datetime | None = None


async def next_round(services: Services, name: str = MAIN) -> NextRound:
    """When series ``name`` opens its next round (asked when no round is open)."""
    row = await latest_series(services.pool, name)
    if row is None:
        return NextRound("none")
    if row.state == "finished" or (row.rounds is not None and row.next_index >= row.rounds):
        return NextRound("over")
    if row.state != "running":
        return NextRound("paused")
    if row.next_index == 0:
        return NextRound("running")
    before = await get_round(services.pool, round_id(row.id, row.next_index - 1))
    gap = timedelta(milliseconds=row.gap_ms)
    return NextRound("running", None if before is None else before.closes_at + gap)


async def pause_series(services: Services, name: str = MAIN) -> SeriesStatus | None:
    """Open no more rounds of series ``name`` (the open one plays to its close and settles)."""
    row = await live_series(services.pool, name)
    if row is None:
        return None
    row = await set_series_state(services.pool, row.id, "paused")
    return None if row is None else SeriesStatus.of(row)


async def resume_series(services: Services, name: str = MAIN) -> SeriesStatus | None:
    """Open rounds of a paused series ``name`` again, from its next round."""
    row = await live_series(services.pool, name)
    if row is None:
        return None
    row = await set_series_state(services.pool, row.id, "running")
    if row is None:
        return None
    await kick(services, row)
    return SeriesStatus.of(row)


async def ensure_rounds(services: Services, plan: RoundPlan) -> str | None:
    """The bot's old call, kept until the bot calls :func:`start_series`: resume the series
    ``main`` with ``plan``'s length, price and count; its id if this call created it."""
    status = await start_series(services, SeriesSettings(
        round_ms=plan.duration_ms, price=plan.price, rounds=plan.count, gap_ms=plan.gap_ms,
        emoji_set=plan.emoji_set))
    return status.id if status.created else None
