"""Helpers for service tests: players, rounds, snapshots of the books, polling."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from psycopg_pool import AsyncConnectionPool

from codemojex.domain import CLASSIC
from codemojex.service import Services
from codemojex.wallet import Granted, create_round, ensure_player, grant_start
from echomq.core import ids
from tests.codemojex.support import new_id

SECRET = ("😀", "😎", "🤖", "👻", "🐱", "🐶")
PRICE = 10


async def make_player(pool: AsyncConnectionPool, coins: int) -> str:
    player = new_id("PLR")
    assert await ensure_player(pool, player, name="p")
    if coins:
        assert isinstance(await grant_start(pool, player, coins), Granted)
    return player


async def make_round(
    pool: AsyncConnectionPool,
    *,
    price: int = PRICE,
    opens_in: timedelta = timedelta(hours=-1),
    closes_in: timedelta = timedelta(hours=1),
    secret: tuple[str, ...] = SECRET,
) -> str:
    rid = ids.generate("RND")
    now = datetime.now(UTC)
    assert await create_round(pool, rid, emoji_set=CLASSIC.id, secret=secret, opens_at=now + opens_in,
                              closes_at=now + closes_in, guess_price=price)
    return rid


@dataclass(frozen=True, slots=True)
class Books:
    """Everything a submission could have changed."""

    guesses: int
    movements: int
    ledger_rows: int
    balances: tuple[tuple[str, int], ...]
    pots: tuple[tuple[str, int], ...]
    jobs: int


async def books(services: Services) -> Books:
    async with services.pool.connection() as conn:
        counts = await (await conn.execute(
            "SELECT (SELECT count(*) FROM guesses), (SELECT count(*) FROM movements),"
            " (SELECT count(*) FROM ledger)")).fetchone()
        balances = await (await conn.execute("SELECT id, balance FROM players ORDER BY id")).fetchall()
        pots = await (await conn.execute("SELECT id, pot FROM rounds ORDER BY id")).fetchall()
    assert counts is not None
    stats = await services.scores.stats()
    return Books(int(counts[0]), int(counts[1]), int(counts[2]),
                 tuple((str(a), int(b)) for a, b in balances), tuple((str(a), int(b)) for a, b in pots),
                 stats.total)


async def eventually(check: Callable[[], Awaitable[bool]], *, timeout_s: float = 20.0,
                     what: str = "condition") -> None:
    """Poll ``check`` until true; fail the test after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not await check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def score_of(pool: AsyncConnectionPool, guess_id: str) -> int | None:
    async with pool.connection() as conn:
        row = await (await conn.execute("SELECT score FROM guesses WHERE id = %s", (guess_id,))).fetchone()
    return None if row is None or row[0] is None else int(row[0])
