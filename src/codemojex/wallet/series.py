"""Series of rounds in PostgreSQL: the plan, where it stands, and the one opener.

A series row (migration ``0003_series``) holds the settings every round of it follows
and ``next_index``, the round to open next. :func:`open_next` is the only writer of a
series' rounds, and it runs under the series' row lock (:func:`~.locks.lock_series`),
so however many open jobs run (late, twice, after a restart, from two processes):

* round *i* is created once, and only when ``next_index`` is *i* (an earlier index is
  answered with the round it made; a later one is skipped);
* a round is created only once the series' open round (if any) is past its closing
  time, and that round is closed in the same transaction: two rounds of one series are
  never open together (the unique index ``rounds_one_open_per_series`` says so too);
* a paused or finished series opens nothing.

Every call is one transaction, retried on a transient failure (:func:`~.tx.retried`);
a retry after a lost commit reply finds ``next_index`` moved and answers the round made.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg_pool import AsyncConnectionPool

from codemojex.wallet.locks import SERIES_COLUMNS, lock, lock_series
from codemojex.wallet.rounds import ROUND_COLUMNS, Round, close_locked, round_from_row
from codemojex.wallet.tx import retried, transaction

__all__ = [
    "NotYet",
    "Opened",
    "SeriesRow",
    "Skipped",
    "create_series",
    "get_series",
    "latest_series",
    "live_series",
    "open_next",
    "running_series",
    "set_series_settings",
    "set_series_state",
]


@dataclass(frozen=True, slots=True)
class SeriesRow:
    id: str
    name: str
    state: str  # running | paused | finished
    round_ms: int
    gap_ms: int
    price: int
    rounds: int | None  # None: unlimited
    start_grant: int
    daily_topup: int
    emoji_set: str
    next_index: int
    epoch: int


def _series(r: Sequence[Any]) -> SeriesRow:
    return SeriesRow(str(r[0]), str(r[1]), str(r[2]), int(r[3]), int(r[4]), int(r[5]),
                     None if r[6] is None else int(r[6]), int(r[7]), int(r[8]), str(r[9]),
                     int(r[10]), int(r[11]))


@dataclass(frozen=True, slots=True)
class Opened:
    """Round ``round`` is the series' round of that index (``created``: by this call)."""

    round: Round
    series: SeriesRow
    created: bool


@dataclass(frozen=True, slots=True)
class NotYet:
    """The series' open round closes at ``due``: run the opener again then."""

    due: datetime
    series: SeriesRow


@dataclass(frozen=True, slots=True)
class Skipped:
    """Nothing to open: ``reason`` is ``paused``, ``finished``, ``ahead`` (an index past
    ``next_index``) or ``unknown`` (no such series)."""

    reason: str
    series: SeriesRow | None


@retried
async def create_series(pool: AsyncConnectionPool, series_id: str, *, name: str, round_ms: int,
                        gap_ms: int, price: int, rounds: int | None, start_grant: int,
                        daily_topup: int, emoji_set: str, next_index: int = 0) -> tuple[SeriesRow, bool]:
    """The live series named ``name``, created as ``series_id`` with these settings if there
    is none: (the series, True if this call created it). Two concurrent calls find one series
    (the unique index on live names decides). Values are checked by the caller.

    A finished series whose last rounds are not all settled yet is still the one: a start
    then (the bot restarted while its season's last round plays or waits to be settled)
    answers it and creates nothing, so a new series never opens a round beside the old
    one's last. Once every round of it is settled, a start begins a new series."""
    async with transaction(pool) as conn:
        cur = await conn.execute(
            "INSERT INTO series (id, name, round_ms, gap_ms, price, rounds, start_grant, daily_topup,"
            " emoji_set, next_index) SELECT %s, %s, %s, %s, %s, %s, %s, %s, %s, %s"
            " WHERE NOT EXISTS (SELECT 1 FROM series s JOIN rounds r ON r.series_id = s.id"
            "                   WHERE s.name = %s AND s.state = 'finished' AND r.state <> 'settled')"
            " ON CONFLICT DO NOTHING RETURNING id",
            (series_id, name, round_ms, gap_ms, price, rounds, start_grant, daily_topup, emoji_set,
             next_index, name))
        created = await cur.fetchone() is not None
        cur = await conn.execute(
            f"SELECT {SERIES_COLUMNS} FROM series WHERE id = %s OR name = %s"
            " ORDER BY (id = %s) DESC, (state <> 'finished') DESC, id DESC LIMIT 1",
            (series_id, name, series_id))
        row = await cur.fetchone()
    assert row is not None  # inserted, or the conflicting row exists (series are never deleted)
    return _series(row), created


async def _one_series(pool: AsyncConnectionPool, where: str, args: tuple[Any, ...]) -> SeriesRow | None:
    """The first series row ``SELECT <columns> FROM series <where>`` finds, else None: one
    read in one transaction (the public readers below retry it, each under its own name)."""
    async with transaction(pool) as conn:
        cur = await conn.execute(f"SELECT {SERIES_COLUMNS} FROM series {where}", args)
        row = await cur.fetchone()
    return None if row is None else _series(row)


@retried
async def get_series(pool: AsyncConnectionPool, series_id: str) -> SeriesRow | None:
    return await _one_series(pool, "WHERE id = %s", (series_id,))


@retried
async def live_series(pool: AsyncConnectionPool, name: str) -> SeriesRow | None:
    """The series named ``name`` that is running or paused (at most one), else None."""
    return await _one_series(pool, "WHERE name = %s AND state <> 'finished'", (name,))


@retried
async def latest_series(pool: AsyncConnectionPool, name: str) -> SeriesRow | None:
    """The live series named ``name``, else the last one finished, else None."""
    return await _one_series(pool, "WHERE name = %s ORDER BY (state <> 'finished') DESC, id DESC LIMIT 1",
                             (name,))


@retried
async def running_series(pool: AsyncConnectionPool, *, after: str = "", limit: int = 100) -> list[SeriesRow]:
    """Running series with an id above ``after``, by id (a cursor: pass the last id seen)."""
    async with transaction(pool) as conn:
        cur = await conn.execute(f"SELECT {SERIES_COLUMNS} FROM series WHERE state = 'running'"
                                 " AND id > %s ORDER BY id LIMIT %s", (after, limit))
        return [_series(r) for r in await cur.fetchall()]


@retried
async def set_series_settings(pool: AsyncConnectionPool, series_id: str, *, round_ms: int, gap_ms: int,
                              price: int, rounds: int | None, start_grant: int,
                              daily_topup: int) -> SeriesRow | None:
    """New settings for the rounds a live series opens from now on (the open round keeps its
    own). A round count at or below the rounds already opened finishes the series."""
    async with transaction(pool) as conn:
        cur = await conn.execute(
            "UPDATE series SET round_ms = %(round_ms)s, gap_ms = %(gap_ms)s, price = %(price)s,"
            " rounds = CASE WHEN %(rounds)s::integer IS NULL THEN NULL"
            "               ELSE greatest(%(rounds)s::integer, next_index) END,"
            " state = CASE WHEN %(rounds)s::integer IS NOT NULL AND next_index >= %(rounds)s::integer"
            "              THEN 'finished' ELSE state END,"
            " start_grant = %(grant)s, daily_topup = %(topup)s"
            f" WHERE id = %(id)s AND state <> 'finished' RETURNING {SERIES_COLUMNS}",
            {"round_ms": round_ms, "gap_ms": gap_ms, "price": price, "rounds": rounds,
             "grant": start_grant, "topup": daily_topup, "id": series_id})
        row = await cur.fetchone()
    return None if row is None else _series(row)


@retried
async def set_series_state(pool: AsyncConnectionPool, series_id: str, state: str) -> SeriesRow | None:
    """Pause (``paused``) or resume (``running``) a live series; a resume bumps its epoch (the
    open job gets a new id). None: no live series with that id."""
    if state not in ("running", "paused"):
        raise ValueError(f"state must be running or paused, not {state!r}")
    async with transaction(pool) as conn:
        cur = await conn.execute(
            "UPDATE series SET epoch = epoch + (CASE WHEN state = 'paused' AND %s = 'running'"
            " THEN 1 ELSE 0 END), state = %s WHERE id = %s AND state <> 'finished'"
            f" RETURNING {SERIES_COLUMNS}", (state, state, series_id))
        row = await cur.fetchone()
    return None if row is None else _series(row)


@retried
async def open_next(pool: AsyncConnectionPool, series_id: str, index: int, *, round_id: str,
                    draw: Callable[[str], Sequence[str]]) -> Opened | NotYet | Skipped:
    """Open round ``index`` of the series as ``round_id`` (see the module docstring).

    ``draw(emoji_set)`` draws the secret; it runs only when the round is created."""
    async with transaction(pool) as conn:
        row = await lock_series(conn, series_id)
        if row is None:
            return Skipped("unknown", None)
        series, now = _series(row[:-1]), row[-1]
        if index < series.next_index:  # opened before (a re-run): the round it made
            cur = await conn.execute(f"SELECT {ROUND_COLUMNS} FROM rounds WHERE series_id = %s"
                                     " AND series_index = %s", (series_id, index))
            made = await cur.fetchone()
            return Skipped("unknown", series) if made is None else Opened(round_from_row(made), series, False)
        if series.state != "running":
            return Skipped(series.state, series)
        if index > series.next_index:
            return Skipped("ahead", series)
        cur = await conn.execute("SELECT id, closes_at FROM rounds WHERE series_id = %s AND state = 'open'",
                                 (series_id,))
        before = await cur.fetchone()
        if before is not None:
            if before[1] > now:
                return NotYet(before[1], series)
            await lock(conn, round_id=str(before[0]), round_mode="update")  # waits out its charges
            await close_locked(conn, str(before[0]))
        await conn.execute(
            "INSERT INTO rounds (id, emoji_set, secret, opens_at, closes_at, guess_price, series_id,"
            " series_index) VALUES (%s, %s, %s, now(), now() + %s * interval '1 millisecond', %s, %s, %s)"
            # a round an older opener made under this id (before series rows): adopted as is
            " ON CONFLICT (id) DO UPDATE SET series_id = EXCLUDED.series_id,"
            " series_index = EXCLUDED.series_index WHERE rounds.series_id IS NULL",
            (round_id, series.emoji_set, list(draw(series.emoji_set)), series.round_ms, series.price,
             series_id, index))
        cur = await conn.execute(
            "UPDATE series SET next_index = %s, state = CASE WHEN rounds IS NOT NULL AND %s >= rounds"
            f" THEN 'finished' ELSE state END WHERE id = %s RETURNING {SERIES_COLUMNS}",
            (index + 1, index + 1, series_id))
        after = await cur.fetchone()
        cur = await conn.execute(f"SELECT {ROUND_COLUMNS} FROM rounds WHERE id = %s", (round_id,))
        made = await cur.fetchone()
    assert after is not None and made is not None
    return Opened(round_from_row(made), _series(after), True)
