"""What PostgreSQL says about itself, for the game's bench (``codemojex bench``): its count of
transactions in the game's database and the process id of the backend serving a connection."""

from __future__ import annotations

from psycopg_pool import AsyncConnectionPool

__all__ = ["backend_pid", "transactions"]


async def transactions(pool: AsyncConnectionPool) -> int:
    """``xact_commit + xact_rollback`` of the current database (``pg_stat_database``; each
    backend reports its own at most once a second). This read is one transaction itself."""
    async with pool.connection() as conn:
        row = await (await conn.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database"
            " WHERE datname = current_database()")).fetchone()
    return int(row[0]) if row else 0


async def backend_pid(pool: AsyncConnectionPool) -> int | None:
    """The process id of the backend serving one of ``pool``'s connections."""
    async with pool.connection() as conn:
        row = await (await conn.execute("SELECT pg_backend_pid()")).fetchone()
    return int(row[0]) if row else None
