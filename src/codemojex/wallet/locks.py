"""The wallet's one lock order, taken by one function: :func:`lock`.

Every transaction that moves money or changes a round's state takes its row
locks here and nowhere else (a test reads the wallet's sources and fails on any
``FOR UPDATE``/``FOR SHARE`` outside this module). The order is:

0. **the series** (:func:`lock_series`, only the round opener takes it), ``FOR NO KEY
   UPDATE``: openers of one series run one at a time; nothing else locks a series;
1. **the round** (at most one per transaction): ``FOR SHARE`` for a charge, so
   one round's charges run side by side; ``FOR NO KEY UPDATE`` to close or
   settle it or to pay from it, so those wait for the charges in flight and
   refuse later ones;
2. **then the players**, all in one statement, in ascending id order,
   ``FOR NO KEY UPDATE``.

Two transactions that lock in the same order cannot wait on each other in a
cycle, so a charge (round, then its player) and a settlement (round, then its
winners) never deadlock. ``NO KEY UPDATE`` rather than ``UPDATE`` leaves the
``FOR KEY SHARE`` locks of foreign-key checks free: recording a score (which
inserts rows referencing the round and the player) never waits on a money lock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from psycopg import AsyncConnection

__all__ = ["Conn", "Locked", "LockedRound", "lock", "lock_series"]

Conn = AsyncConnection[tuple[Any, ...]]

_ROUND_MODES = {"share": "FOR SHARE", "update": "FOR NO KEY UPDATE"}


@dataclass(frozen=True, slots=True)
class LockedRound:
    """The locked round as the server sees it now (its clock, its row)."""

    id: str
    state: str
    early: bool  # now() < opens_at
    late: bool  # now() >= closes_at
    guess_price: int


@dataclass(frozen=True, slots=True)
class Locked:
    """What :func:`lock` found: the round (None if absent or not asked) and the
    balance of every locked player that exists (absent players are left out)."""

    round: LockedRound | None = None
    balances: dict[str, int] = field(default_factory=dict)


async def lock(
    conn: Conn,
    *,
    round_id: str | None = None,
    round_mode: Literal["share", "update"] = "share",
    players: Iterable[str] = (),
) -> Locked:
    """Lock the round (if given) and then ``players`` in ascending id order, inside
    the caller's open transaction. Call it once per transaction, before any write."""
    locked_round = None
    if round_id is not None:
        cur = await conn.execute(
            "SELECT id, state, now() < opens_at, now() >= closes_at, guess_price"
            f" FROM rounds WHERE id = %s {_ROUND_MODES[round_mode]}",
            (round_id,),
        )
        row = await cur.fetchone()
        if row is not None:
            locked_round = LockedRound(str(row[0]), str(row[1]), bool(row[2]), bool(row[3]), int(row[4]))
    wanted = sorted(set(players))
    balances: dict[str, int] = {}
    if wanted:
        # ORDER BY below the row-locking step: rows are locked in id order.
        cur = await conn.execute(
            "SELECT id, balance FROM players WHERE id = ANY(%b::text[]) ORDER BY id FOR NO KEY UPDATE",
            (wanted,),
        )
        balances = {str(i): int(b) for i, b in await cur.fetchall()}
    return Locked(locked_round, balances)


async def lock_series(conn: Conn, series_id: str) -> tuple[object, ...] | None:
    """Lock series ``series_id``'s row (the first lock of the opener's transaction) and
    return ``SERIES_COLUMNS`` of it as the server sees it now, with the database clock
    last; None if there is no such series. Then the opener may :func:`lock` a round."""
    cur = await conn.execute(f"SELECT {SERIES_COLUMNS}, now() FROM series WHERE id = %s FOR NO KEY UPDATE",
                             (series_id,))
    return await cur.fetchone()


SERIES_COLUMNS = ("id, name, state, round_ms, gap_ms, price, rounds, start_grant, daily_topup, emoji_set,"
                  " next_index, epoch")
