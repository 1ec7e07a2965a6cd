"""Amounts are integers in range or a typed error, at every door, before any write."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import pytest
from psycopg_pool import AsyncConnectionPool

from codemojex.domain import CLASSIC
from codemojex.domain.errors import ConfigurationError, InvalidAmount
from codemojex.service import RoundPlan
from codemojex.wallet import (
    MAX_AMOUNT,
    Granted,
    amount,
    charge_guess,
    close_round,
    create_round,
    ensure_player,
    grant,
    grant_start,
    pay,
)
from tests.codemojex.support import new_id

GUESS = ("😀", "😎", "🤖", "👻", "🐱", "🐶")
BAD = [True, False, 1.5, 2.0, math.nan, math.inf, -math.inf, -1, 0, MAX_AMOUNT + 1, 2**63, "5", None, b"5"]
NOW = datetime.now(UTC)


@pytest.mark.parametrize("value", BAD, ids=repr)
def test_amount_refuses(value: object) -> None:
    with pytest.raises(InvalidAmount):
        amount(value)


def test_amount_accepts_integers_in_range() -> None:
    assert amount(1) == 1 and amount(MAX_AMOUNT) == MAX_AMOUNT and amount(0, zero=True) == 0
    assert issubclass(InvalidAmount, ConfigurationError) and issubclass(InvalidAmount, ValueError)


@pytest.mark.parametrize("value", BAD, ids=repr)
def test_a_round_plan_refuses_a_bad_price(value: object) -> None:
    with pytest.raises(InvalidAmount):
        RoundPlan(price=value)  # type: ignore[arg-type]


async def _rows(pool: AsyncConnectionPool) -> tuple[int, ...]:
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT (SELECT count(*) FROM rounds), (SELECT count(*) FROM movements),"
            " (SELECT count(*) FROM ledger), (SELECT count(*) FROM guesses),"
            " (SELECT coalesce(sum(balance), 0) FROM players)")
        row = await cur.fetchone()
    assert row is not None
    return tuple(int(v) for v in row)


async def test_every_door_refuses_every_bad_amount_before_writing(pool: AsyncConnectionPool) -> None:
    player = new_id("PLR")
    await ensure_player(pool, player)
    assert isinstance(await grant_start(pool, player, 100), Granted)
    open_id, closed_id = new_id("RND"), new_id("RND")
    for rid in (open_id, closed_id):
        await create_round(pool, rid, emoji_set=CLASSIC.id, secret=GUESS, opens_at=NOW - timedelta(hours=1),
                           closes_at=NOW + timedelta(hours=1), guess_price=5)
    await close_round(pool, closed_id)
    doors: dict[str, Callable[[object], Awaitable[object]]] = {
        "create_round": lambda v: create_round(
            pool, new_id("RND"), emoji_set=CLASSIC.id, secret=GUESS, opens_at=NOW,
            closes_at=NOW + timedelta(hours=1), guess_price=v),  # type: ignore[arg-type]
        "grant": lambda v: grant(pool, player, v, new_id("REF")),  # type: ignore[arg-type]
        "grant_start": lambda v: grant_start(pool, new_id("PLR"), v),  # type: ignore[arg-type]
        "charge": lambda v: charge_guess(pool, player, open_id, new_id(), GUESS, v),  # type: ignore[arg-type]
        "payout": lambda v: pay(pool, closed_id, player, v, new_id("REF")),  # type: ignore[arg-type]
    }
    before = await _rows(pool)
    for door, call in doors.items():
        for value in BAD:
            if door == "charge" and value is None:
                continue  # no price: the round's own
            with pytest.raises(InvalidAmount):
                await call(value)
            assert await _rows(pool) == before, (door, value)
