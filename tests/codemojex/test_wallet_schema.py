"""The schema on a real PostgreSQL: constraints and migrations."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

from codemojex.domain.errors import MigrationError
from codemojex.infra.pg import open_pool, with_dbname
from codemojex.wallet import ensure_player, load_migrations, migrate
from tests.codemojex.support import drop_database, make_database, new_id


async def test_check_constraint_is_named_players_non_negative(pool: AsyncConnectionPool) -> None:
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint"
            " WHERE conname = 'players_non_negative' AND conrelid = 'players'::regclass"
        )
        row = await cur.fetchone()
    assert row is not None
    assert "balance >= 0" in row[0]


async def test_a_negative_balance_is_refused_by_the_server(pool: AsyncConnectionPool) -> None:
    player = new_id("PLR")
    await ensure_player(pool, player)
    with pytest.raises(psycopg.errors.CheckViolation, match="players_non_negative"):
        async with pool.connection() as conn:
            await conn.execute("UPDATE players SET balance = -1 WHERE id = %s", (player,))


async def _one_legged_movement(pool: AsyncConnectionPool, ref: str) -> None:
    async with pool.connection() as conn, conn.transaction():
        await conn.execute("INSERT INTO movements (ref, kind, amount) VALUES (%s, 'grant', 5)", (ref,))
        await conn.execute("INSERT INTO ledger (ref, account, amount) VALUES (%s, 'house', -5)", (ref,))


async def test_an_unbalanced_movement_cannot_commit(pool: AsyncConnectionPool) -> None:
    with pytest.raises(psycopg.errors.CheckViolation, match="does not sum to zero"):
        await _one_legged_movement(pool, new_id("REF"))


async def test_migrations_rerun_as_a_no_op(pool: AsyncConnectionPool) -> None:
    assert await migrate(pool) == []
    assert await migrate(pool) == []
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT version FROM schema_migrations ORDER BY version")
        versions = [v for (v,) in await cur.fetchall()]
    assert versions == [m.version for m in load_migrations()]


async def test_concurrent_starts_apply_each_migration_once(pg_url: str) -> None:
    name = await asyncio.to_thread(make_database, pg_url, "concurrent_migrate")
    pools = [await open_pool(with_dbname(pg_url, name), max_size=1) for _ in range(4)]
    try:
        results = await asyncio.gather(*(migrate(p) for p in pools))
        applied = sorted(v for r in results for v in r)
        assert applied == [m.version for m in load_migrations()]
    finally:
        for p in pools:
            await p.close()
        await asyncio.to_thread(drop_database, pg_url, name)


async def test_a_changed_applied_migration_is_refused(pool: AsyncConnectionPool) -> None:
    async with pool.connection() as conn:
        await conn.execute("UPDATE schema_migrations SET checksum = 'x' WHERE version = 1")
    try:
        with pytest.raises(MigrationError, match="changed since applied"):
            await migrate(pool)
    finally:
        first = load_migrations()[0]
        async with pool.connection() as conn:
            await conn.execute(
                "UPDATE schema_migrations SET checksum = %s WHERE version = 1", (first.checksum,)
            )
