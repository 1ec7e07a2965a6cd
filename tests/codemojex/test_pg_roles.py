"""Money tables protected by privileges, not only triggers (issue 25, item 6): migrations run
as the owner role, which owns every table; the game runs as ``codemojex_game``, which may
INSERT and SELECT the ledger, movements, guesses and payouts and may not UPDATE, DELETE,
TRUNCATE or ALTER them (nor disable their triggers). Each is tried as the game's role."""

from __future__ import annotations

from collections.abc import AsyncIterator

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

from codemojex.infra.pg import open_pool
from codemojex.service import Admitted, Services, close_and_settle, submit
from codemojex.wallet import audit, get_round, record_score
from codemojex.wallet.migrate import GAME_ROLE, OWNER_ROLE
from echomq import AsyncConnector
from tests.codemojex.game import PRICE, SECRET, make_player, make_round

MONEY = ("ledger", "movements", "guesses", "payouts")


@pytest.fixture
async def game_pool(pool: AsyncConnectionPool, db_url: str) -> AsyncIterator[AsyncConnectionPool]:
    """The module's (migrated) database, as the game's role."""
    p = await open_pool(db_url, min_size=1, max_size=4, role=GAME_ROLE)
    try:
        yield p
    finally:
        await p.close()


async def test_the_owner_role_owns_every_table(pool: AsyncConnectionPool) -> None:
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT tablename, tableowner FROM pg_tables WHERE schemaname = 'public'")
        owners = dict(await cur.fetchall())
    assert set(MONEY) <= set(owners) and set(owners.values()) == {OWNER_ROLE}


async def test_the_game_plays_a_round_as_its_role(game_pool: AsyncConnectionPool, conn: AsyncConnector,
                                                  qname: str) -> None:
    services = Services(game_pool, conn, suffix=f"-{qname}")
    async with game_pool.connection() as c:
        assert await (await c.execute("SELECT current_user")).fetchone() == (GAME_ROLE,)
    player = await make_player(game_pool, 2 * PRICE)
    rid = await make_round(game_pool)
    out = await submit(services, rid, player, list(SECRET))
    assert isinstance(out, Admitted)
    await record_score(game_pool, out.job_id, 600, exact=dict(enumerate(SECRET)))
    async with game_pool.connection() as c:  # the round's time is up
        await c.execute("UPDATE rounds SET state = 'closed', pot = %s WHERE id = %s", (PRICE, rid))
    payouts = await close_and_settle(services, rid)
    assert isinstance(payouts, tuple) and [p.amount for p in payouts] == [PRICE]
    rnd = await get_round(game_pool, rid)
    assert rnd is not None and rnd.state == "settled"
    assert (await audit(game_pool)).ok


FORBIDDEN = [
    *(f"UPDATE {t} SET created_at = now()" for t in ("ledger", "movements", "payouts")),
    "UPDATE ledger SET amount = amount", "UPDATE payouts SET amount = amount",
    "UPDATE guesses SET charged = 0", "UPDATE guesses SET player_id = player_id",
    "UPDATE guesses SET emojis = emojis",
    *(f"DELETE FROM {t}" for t in (*MONEY, "players", "rounds", "series", "locks")),
    *(f"TRUNCATE {t} CASCADE" for t in (*MONEY, "players", "rounds")),
    *(f"ALTER TABLE {t} DISABLE TRIGGER USER" for t in ("ledger", "movements", "rounds")),
    *(f"ALTER TABLE {t} ADD COLUMN x int" for t in MONEY),
    "ALTER TABLE players DROP CONSTRAINT players_non_negative",
    "DROP TRIGGER ledger_append_only ON ledger",
    "UPDATE players SET id = id", "UPDATE rounds SET secret = secret",
    "UPDATE schema_migrations SET checksum = 'x'",
]


@pytest.mark.parametrize("statement", FORBIDDEN)
async def test_the_game_role_may_not(game_pool: AsyncConnectionPool, statement: str) -> None:
    async with game_pool.connection() as c:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await c.execute(statement)
        await c.rollback()


@pytest.mark.parametrize("table", MONEY)
async def test_the_game_role_may_insert_and_select_the_money_tables(
        game_pool: AsyncConnectionPool, table: str) -> None:
    async with game_pool.connection() as c:
        cur = await c.execute(
            "SELECT has_table_privilege(current_user, %s, 'INSERT'),"
            " has_table_privilege(current_user, %s, 'SELECT'),"
            " has_table_privilege(current_user, %s, 'UPDATE'),"
            " has_table_privilege(current_user, %s, 'DELETE'),"
            " has_table_privilege(current_user, %s, 'TRUNCATE')", (table,) * 5)
        assert await cur.fetchone() == (True, True, False, False, False)
