"""Players, rounds, scores, locks and settlement in PostgreSQL.

Settlement is the sealed pass (:func:`codemojex.domain.payouts.settle`) run in
one transaction over the round's row lock: the round must be ``closed`` with
every guess scored; the pot split is computed from the pot at close, every
payout is made with ref ``payout:<round>:<player>``, and the round becomes
``settled``. A re-run finds it settled and returns the stored payouts: it pays
identically and never twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from psycopg_pool import AsyncConnectionPool

from codemojex.domain.payouts import Payout, ScoredGuess, payout_ref, settle
from codemojex.errors import Reason
from codemojex.wallet.money import pay_on
from codemojex.wallet.results import (
    AlreadyScored,
    NotReady,
    Paid,
    RoundRefused,
    Scored,
    UnknownGuess,
)

__all__ = [
    "Round",
    "balance",
    "close_round",
    "create_round",
    "ensure_player",
    "get_round",
    "locked_positions",
    "record_score",
    "scored_guesses",
    "settle_round",
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


async def ensure_player(
    pool: AsyncConnectionPool, player: str, *, name: str = "", chat_id: int | None = None
) -> bool:
    """Create the player with balance 0 if absent; True if created. Never changes a balance."""
    async with pool.connection() as conn:
        cur = await conn.execute(
            "INSERT INTO players (id, name, chat_id) VALUES (%s, %s, %s)"
            " ON CONFLICT (id) DO NOTHING RETURNING id",
            (player, name, chat_id),
        )
        return await cur.fetchone() is not None


async def balance(pool: AsyncConnectionPool, player: str) -> int | None:
    """The player's balance, or None for an unknown player."""
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT balance FROM players WHERE id = %s", (player,))
        row = await cur.fetchone()
        return None if row is None else int(row[0])


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
    """Create an open round with an empty pot; True if created, False if the id exists."""
    async with pool.connection() as conn:
        cur = await conn.execute(
            "INSERT INTO rounds (id, emoji_set, secret, opens_at, closes_at, guess_price)"
            " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING RETURNING id",
            (round_id, emoji_set, list(secret), opens_at, closes_at, guess_price),
        )
        return await cur.fetchone() is not None


async def get_round(pool: AsyncConnectionPool, round_id: str) -> Round | None:
    async with pool.connection() as conn:
        cur = await conn.execute(
            # An open round's pot is the sum of its ledger legs so far; the column is
            # written when the round closes.
            "SELECT id, emoji_set, secret, opens_at, closes_at, state, guess_price,"
            " CASE WHEN state = 'open' THEN (SELECT coalesce(sum(amount), 0) FROM ledger"
            " WHERE account = 'round:' || rounds.id) ELSE pot END"
            " FROM rounds WHERE id = %s",
            (round_id,),
        )
        r = await cur.fetchone()
    if r is None:
        return None
    return Round(r[0], r[1], tuple(r[2]), r[3], r[4], r[5], int(r[6]), int(r[7]))


async def close_round(pool: AsyncConnectionPool, round_id: str) -> str | None:
    """Move an open round to ``closed``; return its state afterwards (None: no round).

    After this commits no charge can add to the pot: charges share-lock the round's
    row and refuse a round that is not open; the close waits for those in flight.
    """
    async with pool.connection() as conn, conn.transaction():
        # First wait for the charges in flight (they share-lock the row), then, in a new
        # statement (so a new snapshot that sees them all), close and fix the pot.
        cur = await conn.execute("SELECT state FROM rounds WHERE id = %s FOR UPDATE", (round_id,))
        row = await cur.fetchone()
        if row is None:
            return None
        if row[0] != "open":
            return str(row[0])
        await conn.execute(
            "UPDATE rounds SET state = 'closed', pot = (SELECT coalesce(sum(amount), 0)"
            " FROM ledger WHERE account = 'round:' || rounds.id) WHERE id = %s",
            (round_id,),
        )
        return "closed"


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
    """
    async with pool.connection() as conn, conn.transaction():
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


async def locked_positions(pool: AsyncConnectionPool, round_id: str, player: str) -> dict[int, str]:
    """The player's locks in the round, for :func:`codemojex.domain.locks.merge`."""
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT position, emoji FROM locks WHERE round_id = %s AND player_id = %s",
            (round_id, player),
        )
        return {int(p): str(e) for p, e in await cur.fetchall()}


async def scored_guesses(pool: AsyncConnectionPool, round_id: str) -> list[ScoredGuess]:
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT id, player_id, score FROM guesses WHERE round_id = %s AND score IS NOT NULL ORDER BY id",
            (round_id,),
        )
        return [ScoredGuess(str(i), str(p), int(s)) for i, p, s in await cur.fetchall()]


async def settle_round(
    pool: AsyncConnectionPool, round_id: str
) -> tuple[Payout, ...] | NotReady | RoundRefused:
    """Settle a closed, fully scored round (see the module docstring). Idempotent."""
    async with pool.connection() as conn, conn.transaction():
        cur = await conn.execute("SELECT state FROM rounds WHERE id = %s FOR UPDATE", (round_id,))
        row = await cur.fetchone()
        if row is None:
            return RoundRefused(round_id, Reason.NO_ROUND)
        state = str(row[0])
        if state == "settled":
            cur = await conn.execute(
                "SELECT player_id, amount, guess_id FROM payouts WHERE round_id = %s ORDER BY player_id",
                (round_id,),
            )
            return tuple(Payout(str(p), int(a), str(g)) for p, a, g in await cur.fetchall())
        cur = await conn.execute(
            "SELECT count(*) FILTER (WHERE score IS NULL), coalesce(sum(charged), 0)"
            " FROM guesses WHERE round_id = %s",
            (round_id,),
        )
        counts = await cur.fetchone()
        assert counts is not None
        unscored, pot = int(counts[0]), int(counts[1])
        if state != "closed" or unscored:
            return NotReady(round_id, state, unscored)
        cur = await conn.execute("SELECT id, player_id, score FROM guesses WHERE round_id = %s", (round_id,))
        guesses = [ScoredGuess(str(i), str(p), int(s)) for i, p, s in await cur.fetchall()]
        payouts = settle(pot, guesses)
        for p in payouts:
            result = await pay_on(
                conn, round_id, p.player, p.amount, payout_ref(round_id, p.player), p.guess_id
            )
            # Under the round lock in state 'closed' nobody else pays this round.
            assert isinstance(result, Paid), result
        await conn.execute(
            "UPDATE rounds SET state = 'settled', settled_at = now() WHERE id = %s", (round_id,)
        )
        return payouts
