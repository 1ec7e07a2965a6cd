"""One lock order: a source check that one function takes the locks, and a stress test
of settlements and charges on the same rounds and players on a real PostgreSQL."""

from __future__ import annotations

import asyncio
import random
import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from psycopg_pool import AsyncConnectionPool

import codemojex.wallet
from codemojex.domain import CLASSIC
from codemojex.infra.pg import open_pool
from codemojex.wallet import (
    STATS,
    Charged,
    RoundRefused,
    audit,
    charge_guess,
    close_round,
    create_round,
    ensure_player,
    grant_start,
    migrate,
    settle_round,
)
from tests.codemojex.support import new_id

GUESS = ("😀", "😎", "🤖", "👻", "🐱", "🐶")
_ROW_LOCK = re.compile(r"\bFOR\s+(NO\s+KEY\s+UPDATE|UPDATE|SHARE|KEY\s+SHARE)\b")  # SQL is upper case


def test_only_the_lock_module_takes_row_locks() -> None:
    """The order is enforced by structure: no other wallet or service module locks rows."""
    src = Path(codemojex.wallet.__file__).parent.parent
    offenders = [
        str(p.relative_to(src))
        for p in sorted(src.rglob("*.py"))
        if p.name != "locks.py" and _ROW_LOCK.search(p.read_text(encoding="utf-8"))
    ]
    assert offenders == []
    assert _ROW_LOCK.search((src / "wallet" / "locks.py").read_text(encoding="utf-8"))


async def _deadlocks(url: str) -> int:
    """The server's own count of deadlocks detected in this database."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def _new_round(pool: AsyncConnectionPool) -> str:
    rid = new_id("RND")
    now = datetime.now(UTC)
    assert await create_round(pool, rid, emoji_set=CLASSIC.id, secret=GUESS,
                              opens_at=now - timedelta(seconds=1), closes_at=now + timedelta(hours=1),
                              guess_price=3)
    return rid


async def test_settlements_and_charges_concurrently_never_deadlock(db_url: str) -> None:
    """Rounds are closed and settled (by several settlers at once) while the same players
    keep charging both the round being settled (refused: closed) and the next one.

    The old order (charge: player then round; settle: round then winners) deadlocked here.
    """
    target, players_n, rounds_n = 2_000, 16, 6
    pool = await open_pool(db_url, min_size=4, max_size=12)
    try:
        await migrate(pool)
        players = [new_id("PLR") for _ in range(players_n)]
        for p in players:
            await ensure_player(pool, p)
            await grant_start(pool, p, 10**9)
        before_server, before_client = await _deadlocks(db_url), STATS.deadlocks
        rng = random.Random(12)
        current = [await _new_round(pool)]
        settling: list[str] = []
        charged = refused = 0
        stop = asyncio.Event()

        async def player(pid: str) -> None:
            nonlocal charged, refused
            while not stop.is_set():
                rid = rng.choice(settling[-1:] + current[-1:] * 3)
                out = await charge_guess(pool, pid, rid, new_id(), GUESS)
                if isinstance(out, Charged):
                    charged += 1
                else:
                    assert isinstance(out, RoundRefused), out
                    refused += 1

        async def conductor() -> None:
            per_round = target // rounds_n + 1
            while charged < target:
                if charged < per_round * len(current):
                    await asyncio.sleep(0.005)
                    continue
                old = current[-1]
                current.append(await _new_round(pool))
                settling.append(old)
                assert await close_round(pool, old) == "closed"
                async with pool.connection() as conn:  # scoring is not under test: one statement
                    await conn.execute("UPDATE guesses SET score = (hashtext(id) & 511) %% 601,"
                                       " scored_at = now() WHERE round_id = %s", (old,))
                # Several settlers at once on the round, while its winners keep charging.
                results = await asyncio.gather(*(settle_round(pool, old) for _ in range(3)))
                assert all(isinstance(r, tuple) and r for r in results) and len(set(results)) == 1
            stop.set()

        started = time.monotonic()
        await asyncio.gather(conductor(), *(player(p) for p in players))
        elapsed = time.monotonic() - started
        after_client = STATS.deadlocks
    finally:
        await pool.close()  # backends exit and flush their statistics
    await asyncio.sleep(0)
    after_server = await _deadlocks(db_url)
    print(f"\nlock-order stress: {charged} charges, {refused} refused (closed round), "
          f"{len(settling)} rounds settled by 3 settlers each, {elapsed:.1f} s; deadlocks: "
          f"server {after_server - before_server}, client {after_client - before_client}")
    assert charged >= target and len(settling) >= rounds_n - 1 and refused > 0
    assert after_server - before_server == 0
    assert after_client - before_client == 0
    pool = await open_pool(db_url, max_size=2)
    try:
        assert (await audit(pool)).failures == {}
    finally:
        await pool.close()
