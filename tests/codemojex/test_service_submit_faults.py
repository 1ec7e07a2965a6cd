"""``submit`` and settlement ride out PostgreSQL faults.

A commit whose reply is lost is retried and charges once (inside one call with a
minted id; across two calls with the caller's key).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

from codemojex.domain import format_guess
from codemojex.domain.errors import Reason
from codemojex.service import Admitted, Services, submit
from codemojex.wallet import RetryPolicy, audit, balance, migrate, retry_policy
from echomq import AsyncConnector
from tests.codemojex.game import PRICE, make_player, make_round

GUESS = ("🍕", "🍩", "🚀", "⚽", "🎸", "❤️")


class _Conn(psycopg.AsyncConnection[Any]):
    """Remembers whether this checkout wrote a guess row."""

    wrote_guess = False

    async def execute(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        # Any statement that writes guess rows (the charge group's is one WITH ... statement).
        if isinstance(query, str) and "INSERT INTO guesses" in query:
            self.wrote_guess = True
        return await super().execute(query, *args, **kwargs)


class LosingPool(AsyncConnectionPool[_Conn]):
    """Loses the reply of the next ``lose`` commits that wrote a guess: the commit happened,
    the caller sees the error a dropped connection gives."""

    lose = 0

    @asynccontextmanager
    async def connection(self, timeout: float | None = None) -> AsyncIterator[_Conn]:  # noqa: ASYNC109
        async with super().connection(timeout=timeout) as conn:
            conn.wrote_guess = False
            yield conn
            wrote = conn.wrote_guess
        if wrote and self.lose:
            self.lose -= 1
            raise psycopg.OperationalError("server closed the connection unexpectedly (reply lost)")


@pytest.fixture
async def losing(db_url: str, conn: AsyncConnector, qname: str) -> AsyncIterator[tuple[Services, LosingPool]]:
    pool = LosingPool(db_url, connection_class=_Conn, min_size=1, max_size=4, open=False)
    await pool.open(wait=True)
    try:
        await migrate(pool)
        yield Services(pool, conn, suffix=f"-{qname}"), pool
    finally:
        await pool.close()


async def _charged(pool: AsyncConnectionPool, player: str) -> int:
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT count(*) FROM guesses WHERE player_id = %s", (player,))
        row = await cur.fetchone()
    return int(row[0]) if row else 0


async def test_a_lost_commit_reply_inside_submit_charges_once(losing: tuple[Services, LosingPool]) -> None:
    services, pool = losing
    player = await make_player(pool, PRICE * 5)
    rid = await make_round(pool)
    pool.lose = 1
    out = await submit(services, rid, player, format_guess(GUESS))  # no key: the minted id is reused
    assert isinstance(out, Admitted) and pool.lose == 0
    assert await _charged(pool, player) == 1 and await balance(pool, player) == PRICE * 4
    assert (await audit(pool)).ok


async def test_a_retry_with_the_same_key_after_a_lost_reply_charges_once(
    losing: tuple[Services, LosingPool],
) -> None:
    services, pool = losing
    player = await make_player(pool, PRICE * 5)
    rid = await make_round(pool)
    pool.lose = 1
    with retry_policy(RetryPolicy(deadline_s=0)):  # no time to retry: the caller sees unavailable
        first = await submit(services, rid, player, format_guess(GUESS), key="chat-7:msg-42")
    assert first is Reason.UNAVAILABLE
    again = await submit(services, rid, player, format_guess(GUESS), key="chat-7:msg-42")
    assert isinstance(again, Admitted) and again.queued  # the first call never admitted it
    assert await _charged(pool, player) == 1 and await balance(pool, player) == PRICE * 4
    other = await submit(services, rid, player, format_guess(GUESS), key="chat-7:msg-43")
    assert isinstance(other, Admitted) and other.job_id != again.job_id
    assert await _charged(pool, player) == 2
