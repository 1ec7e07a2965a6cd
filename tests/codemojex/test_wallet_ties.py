"""Ties go by the server's charge order (``guesses.seq``), never by an id's bits: tested with
ids derived the way the bot derives them (timestamp 0, so their order is a hash's)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from psycopg_pool import AsyncConnectionPool

from codemojex.domain import CLASSIC
from codemojex.service.codec import derive_id
from codemojex.wallet import (
    Charged,
    Granted,
    charge_guess,
    close_round,
    create_round,
    ensure_player,
    grant_start,
    record_score,
    scored_guesses,
    settle_round,
)
from echomq.core import ids
from tests.codemojex.support import new_id

GUESS = ("😀", "😎", "🤖", "👻", "🐱", "🐶")


def _telegram_guess_id(bot: int, update: int) -> str:
    """As the bot does: the command job's id from the update, the guess id from the command job."""
    command_job = derive_id("JOB", "tg-update", f"{bot}:{update}")
    return derive_id("JOB", "guess", command_job)


def _pair_in_reverse_id_order() -> tuple[str, str]:
    """Two consecutive updates whose guess ids sort the other way round."""
    for update in itertools.count(1):
        first, second = _telegram_guess_id(7, update), _telegram_guess_id(7, update + 1)
        if first > second:
            return first, second
    raise AssertionError("unreachable")


async def test_the_earlier_of_two_equal_telegram_guesses_gets_the_odd_coin(pool: AsyncConnectionPool) -> None:
    earlier, later = _pair_in_reverse_id_order()
    assert ids.timestamp_ms(earlier) == 0 == ids.timestamp_ms(later)  # no time in these ids
    assert earlier > later  # by bits the later guess would win the tie
    ann, bob, cat = (new_id("PLR") for _ in range(3))
    for p in (ann, bob, cat):
        await ensure_player(pool, p)
        assert isinstance(await grant_start(pool, p, 100), Granted)
    rid = new_id("RND")
    now = datetime.now(UTC)
    await create_round(pool, rid, emoji_set=CLASSIC.id, secret=GUESS, opens_at=now - timedelta(minutes=1),
                       closes_at=now + timedelta(hours=1), guess_price=7)
    third = new_id()
    for pid, gid in ((ann, earlier), (bob, later), (cat, third)):  # charged in this order
        assert isinstance(await charge_guess(pool, pid, rid, gid, GUESS), Charged)
    for gid, s in ((earlier, 300), (later, 300), (third, 0)):
        await record_score(pool, gid, s)
    assert [g.guess_id for g in await scored_guesses(pool, rid)] == [earlier, later, third]
    await close_round(pool, rid)
    payouts = await settle_round(pool, rid)
    assert isinstance(payouts, tuple)
    # pot 21 over two equal scores: 10 each, the odd coin to the earliest best guess.
    assert {p.player: p.amount for p in payouts} == {ann: 11, bob: 10}
