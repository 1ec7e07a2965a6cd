"""The game's database at start-up: migrations as the owner role, then the game's own pool.

Every command that runs the game (``codemojex play``, ``codemojex bot``, ``codemojex
bench``) starts the same way: a one-connection pool as the connecting user runs the
migrations (which hand the tables to the owner role) and closes, then the pool the game
runs on is opened as the game's role, with the game's privileges only.
"""

from __future__ import annotations

from psycopg_pool import AsyncConnectionPool

from codemojex.infra.pg import open_pool
from codemojex.wallet import migrate, retry
from codemojex.wallet.migrate import GAME_ROLE

__all__ = ["migrate_then_open"]


async def migrate_then_open(pg_url: str, *, min_size: int, max_size: int) -> AsyncConnectionPool:
    """Migrate ``pg_url`` (retried while PostgreSQL comes up) and open the game's pool."""
    owner = await open_pool(pg_url, min_size=1, max_size=1, name="codemojex-migrate")
    try:
        await retry(lambda: migrate(owner), what="migrate", pool=owner)
    finally:
        await owner.close()
    return await open_pool(pg_url, min_size=min_size, max_size=max_size, role=GAME_ROLE)
