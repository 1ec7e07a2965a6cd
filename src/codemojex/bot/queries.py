"""The reads the bot needs from PostgreSQL that the wallet does not offer: the round
being played now and the leaderboard. Read-only; each is one query."""

from __future__ import annotations

from psycopg_pool import AsyncConnectionPool

from codemojex.wallet import Round, get_round

__all__ = ["current_round", "leaderboard"]


async def current_round(pool: AsyncConnectionPool) -> Round | None:
    """The open round accepting guesses now (database clock); the latest if several."""
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT id FROM rounds WHERE state = 'open' AND opens_at <= now() AND closes_at > now()"
            " ORDER BY opens_at DESC, id DESC LIMIT 1")
        row = await cur.fetchone()
    return None if row is None else await get_round(pool, str(row[0]))


async def leaderboard(pool: AsyncConnectionPool, limit: int = 10) -> list[tuple[str, str, int]]:
    """The ``limit`` richest players: (id, name, balance), richest first, ties by id."""
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT id, name, balance FROM players ORDER BY balance DESC, id LIMIT %s", (limit,))
        return [(str(i), str(n), int(b)) for i, n, b in await cur.fetchall()]
