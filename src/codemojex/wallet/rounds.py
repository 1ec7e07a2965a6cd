"""Rounds, scores and position locks in PostgreSQL (players: :mod:`.players`; settlement:
:mod:`.settle`; reads outside a movement: :mod:`.reads`).

Every call is one transaction with its isolation level set
(:func:`codemojex.wallet.tx.transaction`), retried on a transient failure, and
idempotent, so a retry after a lost commit reply changes nothing twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg_pool import AsyncConnectionPool

from codemojex.domain.payouts import ScoredGuess
from codemojex.wallet.amounts import amount
from codemojex.wallet.locks import Conn, lock
from codemojex.wallet.results import AlreadyScored, Scored, UnknownGuess
from codemojex.wallet.tx import retried, transaction

__all__ = [
    "ROUND_COLUMNS",
    "Round",
    "close_locked",
    "close_round",
    "create_round",
    "get_round",
    "locked_positions",
    "record_score",
    "round_from_row",
    "scored_guesses",
]


@dataclass(frozen=True, slots=True)
class Round:
    id: str
    emoji_set: str
    secret: tuple[str, ...]
    opens_at: datetime
    closes_at: datetime
    state: str
    guess_price: int
    pot: int
    secret_hash: str = ""  # from PostgreSQL (its trigger computes it); "" from the cache tier


# A round as one row. An open round's pot is the sum of its ledger legs so far; the
# column is written when the round closes.
ROUND_COLUMNS = (
    "id, emoji_set, secret, opens_at, closes_at, state, guess_price,"
    " CASE WHEN state = 'open' THEN (SELECT coalesce(sum(amount), 0) FROM ledger"
    " WHERE account = 'round:' || rounds.id) ELSE pot END, secret_hash"
)


def round_from_row(r: Sequence[Any]) -> Round:
    """The :class:`Round` of a row selected with :data:`ROUND_COLUMNS`."""
    return Round(r[0], r[1], tuple(r[2]), r[3], r[4], r[5], int(r[6]), int(r[7]), str(r[8] or ""))


@retried
async def create_round(
    pool: AsyncConnectionPool,
    round_id: str,
    *,
    emoji_set: str,
    secret: Sequence[str],
    opens_at: datetime,
    closes_at: datetime,
    guess_price: int,
) -> bool:
    """Create an open round with an empty pot; True if created, False if the id exists.

    ``guess_price`` must be an integer in range (:func:`codemojex.wallet.amounts.amount`);
    anything else raises :class:`~codemojex.domain.errors.InvalidAmount` and writes nothing.
    """
    guess_price = amount(guess_price, "guess_price")
    async with transaction(pool) as conn:
        cur = await conn.execute(
            "INSERT INTO rounds (id, emoji_set, secret, opens_at, closes_at, guess_price)"
            " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING RETURNING id",
            (round_id, emoji_set, list(secret), opens_at, closes_at, guess_price),
        )
        return await cur.fetchone() is not None


@retried
async def get_round(pool: AsyncConnectionPool, round_id: str) -> Round | None:
    async with transaction(pool) as conn:
        cur = await conn.execute(f"SELECT {ROUND_COLUMNS} FROM rounds WHERE id = %s", (round_id,))
        r = await cur.fetchone()
    return None if r is None else round_from_row(r)


@retried
async def close_round(pool: AsyncConnectionPool, round_id: str) -> str | None:
    """Move an open round to ``closed``; return its state afterwards (None: no round).

    After this commits no charge can add to the pot: charges share-lock the round's
    row and refuse a round that is not open; the close waits for those in flight.
    """
    async with transaction(pool) as conn:
        # First wait for the charges in flight (they share-lock the row), then, in a new
        # statement (READ COMMITTED: a new snapshot that sees them all), close and fix the pot.
        rnd = (await lock(conn, round_id=round_id, round_mode="update")).round
        if rnd is None:
            return None
        if rnd.state != "open":
            return rnd.state
        await close_locked(conn, round_id)
        return "closed"


async def close_locked(conn: Conn, round_id: str) -> None:
    """Close open round ``round_id`` and fix its pot, in the caller's transaction, which
    holds the round's lock in ``update`` mode (so the charges in flight have committed)."""
    await conn.execute(
        "UPDATE rounds SET state = 'closed', pot = (SELECT coalesce(sum(amount), 0)"
        " FROM ledger WHERE account = 'round:' || rounds.id) WHERE id = %s AND state = 'open'",
        (round_id,),
    )


@retried
async def record_score(
    pool: AsyncConnectionPool,
    guess_id: str,
    score: int,
    *,
    exact: Mapping[int, str] | None = None,
) -> Scored | AlreadyScored | UnknownGuess:
    """Record a guess's score once (``UPDATE … WHERE score IS NULL``) and, in the
    same transaction, lock the positions in ``exact`` for its player and round.
    A second call returns :class:`AlreadyScored` with the first score and changes nothing.
    It takes no money lock (the foreign-key checks' key-share locks do not conflict
    with :func:`~codemojex.wallet.locks.lock`'s), so scoring never waits on a settlement.
    """
    async with transaction(pool) as conn:
        cur = await conn.execute(
            "UPDATE guesses SET score = %s, scored_at = now()"
            " WHERE id = %s AND score IS NULL RETURNING round_id, player_id",
            (score, guess_id),
        )
        row = await cur.fetchone()
        if row is None:
            cur = await conn.execute("SELECT score FROM guesses WHERE id = %s", (guess_id,))
            old = await cur.fetchone()
            return UnknownGuess(guess_id) if old is None else AlreadyScored(guess_id, int(old[0]))
        round_id, player = row
        for pos, emoji in sorted((exact or {}).items()):
            await conn.execute(
                "INSERT INTO locks (round_id, player_id, position, emoji) VALUES (%s, %s, %s, %s)"
                " ON CONFLICT DO NOTHING",
                (round_id, player, pos, emoji),
            )
        return Scored(guess_id, score)


@retried
async def locked_positions(pool: AsyncConnectionPool, round_id: str, player: str) -> dict[int, str]:
    """The player's locks in the round, for :func:`codemojex.domain.locks.merge`."""
    async with transaction(pool) as conn:
        cur = await conn.execute(
            "SELECT position, emoji FROM locks WHERE round_id = %s AND player_id = %s",
            (round_id, player),
        )
        return {int(p): str(e) for p, e in await cur.fetchall()}


@retried
async def scored_guesses(pool: AsyncConnectionPool, round_id: str) -> list[ScoredGuess]:
    """The round's scored guesses in the server's order (``seq``, the tie-break order)."""
    async with transaction(pool) as conn:
        cur = await conn.execute(
            "SELECT id, player_id, score, seq FROM guesses WHERE round_id = %s AND score IS NOT NULL"
            " ORDER BY seq",
            (round_id,),
        )
        return [ScoredGuess(str(i), str(p), int(s), int(q)) for i, p, s, q in await cur.fetchall()]
