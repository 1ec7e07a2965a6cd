"""Players in PostgreSQL: created once, their balance read (money moves in :mod:`.money`).

Each call is one transaction (:func:`codemojex.wallet.tx.transaction`), retried on a
transient failure, and idempotent.
"""

from __future__ import annotations

from psycopg_pool import AsyncConnectionPool

from codemojex.wallet.tx import retried, transaction

__all__ = ["balance", "ensure_player"]


@retried
async def ensure_player(
    pool: AsyncConnectionPool, player: str, *, name: str = "", chat_id: int | None = None
) -> bool:
    """Create the player with balance 0 if absent; True if created. Never changes a balance."""
    async with transaction(pool) as conn:
        cur = await conn.execute(
            "INSERT INTO players (id, name, chat_id) VALUES (%s, %s, %s)"
            " ON CONFLICT (id) DO NOTHING RETURNING id",
            (player, name, chat_id),
        )
        return await cur.fetchone() is not None


@retried
async def balance(pool: AsyncConnectionPool, player: str) -> int | None:
    """The player's balance, or None for an unknown player."""
    async with transaction(pool) as conn:
        cur = await conn.execute("SELECT balance FROM players WHERE id = %s", (player,))
        row = await cur.fetchone()
        return None if row is None else int(row[0])
