"""Every wallet transaction sets its isolation level: on a server whose default is
REPEATABLE READ, concurrent charges, a close racing them and settlement behave exactly
as on the default server, with no serialization failure (so nothing was retried)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from codemojex.domain import CLASSIC
from codemojex.infra.pg import open_pool, with_dbname
from codemojex.wallet import (
    STATS,
    Charged,
    Granted,
    Insufficient,
    RoundRefused,
    audit,
    charge_guess,
    close_round,
    create_round,
    ensure_player,
    grant_start,
    migrate,
    record_score,
    settle_round,
)
from tests.codemojex.support import drop_database, make_database, new_id

GUESS = ("😀", "😎", "🤖", "👻", "🐱", "🐶")


@pytest.fixture
async def rr_pool(pg_url: str) -> AsyncIterator[AsyncConnectionPool]:
    name = await asyncio.to_thread(make_database, pg_url, "repeatable_read")
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        await conn.execute(sql.SQL("ALTER DATABASE {} SET default_transaction_isolation = 'repeatable read'")
                           .format(sql.Identifier(name)))
    pool = await open_pool(with_dbname(pg_url, name), max_size=10)
    try:
        async with pool.connection() as conn:
            cur = await conn.execute("SHOW default_transaction_isolation")
            assert await cur.fetchone() == ("repeatable read",)
        await migrate(pool)
        yield pool
    finally:
        await pool.close()
        await asyncio.to_thread(drop_database, pg_url, name)


async def test_the_wallet_on_a_repeatable_read_server(rr_pool: AsyncConnectionPool) -> None:
    pool = rr_pool
    failures_before = STATS.serialization_failures
    player = new_id("PLR")
    await ensure_player(pool, player)
    assert isinstance(await grant_start(pool, player, 37 * 10), Granted)
    rid = new_id("RND")
    now = datetime.now(UTC)
    await create_round(pool, rid, emoji_set=CLASSIC.id, secret=GUESS, opens_at=now - timedelta(minutes=1),
                       closes_at=now + timedelta(hours=1), guess_price=10)
    # 200 concurrent charges of one player: each waits for the player's lock and must then
    # see the balance the previous one left (a REPEATABLE READ snapshot would not).
    results = await asyncio.gather(*(charge_guess(pool, player, rid, new_id(), GUESS) for _ in range(200)))
    assert sum(isinstance(r, Charged) for r in results) == 37
    assert sum(isinstance(r, Insufficient) for r in results) == 163
    # A close racing more charges: each charge is either in the pot or refused as closed.
    other = new_id("PLR")
    await ensure_player(pool, other)
    await grant_start(pool, other, 1000)
    racing = [charge_guess(pool, other, rid, new_id(), GUESS) for _ in range(30)]
    outcomes = await asyncio.gather(*racing, close_round(pool, rid))
    charged = [r for r in outcomes[:-1] if isinstance(r, Charged)]
    assert all(isinstance(r, Charged | RoundRefused) for r in outcomes[:-1])
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT id FROM guesses WHERE round_id = %s", (rid,))
        guess_ids = [str(i) for (i,) in await cur.fetchall()]
        cur = await conn.execute("SELECT pot FROM rounds WHERE id = %s", (rid,))
        assert await cur.fetchone() == (370 + 10 * len(charged),)
    for i, gid in enumerate(guess_ids):
        await record_score(pool, gid, (i * 37) % 601)
    payouts = await settle_round(pool, rid)
    assert isinstance(payouts, tuple) and sum(p.amount for p in payouts) == 370 + 10 * len(charged)
    assert (await audit(pool)).failures == {}
    assert STATS.serialization_failures == failures_before  # nothing had to be retried
