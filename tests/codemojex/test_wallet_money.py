"""Money on a real PostgreSQL: charges, grants, payouts, scores, relay, settlement, audit."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from psycopg_pool import AsyncConnectionPool

from codemojex.domain import CLASSIC, draw_secret, exact_positions, score
from codemojex.domain.errors import Reason
from codemojex.wallet import (
    AlreadyApplied,
    AlreadyCharged,
    AlreadyPaid,
    AlreadyScored,
    Charged,
    Granted,
    Insufficient,
    NotReady,
    Paid,
    RoundRefused,
    Scored,
    UnknownGuess,
    UnknownPlayer,
    audit,
    balance,
    charge_guess,
    close_round,
    create_round,
    ensure_player,
    get_round,
    grant,
    grant_start,
    locked_positions,
    mark_admitted,
    pay,
    record_score,
    settle_round,
    unadmitted,
)
from tests.codemojex.support import new_id

GUESS = ("😀", "😎", "🤖", "👻", "🐱", "🐶")


async def _player(pool: AsyncConnectionPool, coins: int) -> str:
    player = new_id("PLR")
    assert await ensure_player(pool, player, name="p")
    if coins:
        assert isinstance(await grant_start(pool, player, coins), Granted)
    return player


async def _round(
    pool: AsyncConnectionPool, *, price: int = 10, closes_in: timedelta = timedelta(hours=1)
) -> str:
    round_id = new_id("RND")
    now = datetime.now(UTC)
    assert await create_round(
        pool,
        round_id,
        emoji_set=CLASSIC.id,
        secret=GUESS,
        opens_at=now - timedelta(hours=1),
        closes_at=now + closes_in,
        guess_price=price,
    )
    return round_id


async def test_200_concurrent_charges_exactly_37_succeed(pool: AsyncConnectionPool) -> None:
    player = await _player(pool, 37 * 10)
    round_id = await _round(pool, price=10)
    results = await asyncio.gather(
        *(charge_guess(pool, player, round_id, new_id(), GUESS, 10) for _ in range(200))
    )
    assert sum(isinstance(r, Charged) for r in results) == 37
    assert sum(isinstance(r, Insufficient) for r in results) == 163
    assert all(r.reason is Reason.INSUFFICIENT for r in results if isinstance(r, Insufficient))
    assert await balance(pool, player) == 0
    rnd = await get_round(pool, round_id)
    assert rnd is not None
    assert rnd.pot == 370
    assert (await audit(pool)).ok


async def test_a_retried_charge_applies_once(pool: AsyncConnectionPool) -> None:
    player = await _player(pool, 100)
    round_id = await _round(pool)
    guess_id = new_id()
    first = await charge_guess(pool, player, round_id, guess_id, GUESS)
    assert first == Charged(guess_id, 90, 10)
    assert await charge_guess(pool, player, round_id, guess_id, GUESS) == AlreadyCharged(guess_id)
    assert await balance(pool, player) == 90


async def test_refusals_change_nothing(pool: AsyncConnectionPool) -> None:
    player = await _player(pool, 5)
    round_id = await _round(pool, price=10)
    expired = await _round(pool, closes_in=timedelta(seconds=-1))
    assert await charge_guess(pool, player, round_id, new_id(), GUESS) == Insufficient(5, 10)
    missing = await charge_guess(pool, player, "nope", new_id(), GUESS, 1)
    assert missing == RoundRefused("nope", Reason.NO_ROUND)
    late = await charge_guess(pool, player, expired, new_id(), GUESS, 1)
    assert late == RoundRefused(expired, Reason.EXPIRED)
    assert await close_round(pool, round_id) == "closed"
    closed = await charge_guess(pool, player, round_id, new_id(), GUESS, 1)
    assert closed == RoundRefused(round_id, Reason.CLOSED)
    ghost = await charge_guess(pool, "ghost", round_id, new_id(), GUESS, 1)
    assert ghost == UnknownPlayer("ghost")
    assert await balance(pool, player) == 5


async def test_a_retried_grant_applies_once(pool: AsyncConnectionPool) -> None:
    player = await _player(pool, 50)
    again = await grant_start(pool, player, 50)
    assert isinstance(again, AlreadyApplied)
    ref = new_id("REF")
    results = await asyncio.gather(*(grant(pool, player, 7, ref) for _ in range(20)))
    assert sum(isinstance(r, Granted) for r in results) == 1
    assert await balance(pool, player) == 57
    assert (await audit(pool)).ledger_sum == 0


async def test_pay_is_idempotent_by_ref_and_by_winner(pool: AsyncConnectionPool) -> None:
    player = await _player(pool, 100)
    round_id = await _round(pool)
    for _ in range(3):
        assert isinstance(await charge_guess(pool, player, round_id, new_id(), GUESS), Charged)
    ref = f"payout:{round_id}:{player}"
    with pytest.raises(ValueError, match="pay after close"):
        await pay(pool, round_id, player, 30, ref)
    assert await close_round(pool, round_id) == "closed"
    assert (await get_round(pool, round_id)).pot == 30  # type: ignore[union-attr]
    assert await pay(pool, round_id, player, 30, ref) == Paid(ref, 100)
    assert await pay(pool, round_id, player, 30, ref) == AlreadyPaid(ref)
    assert await pay(pool, round_id, player, 30, "other-ref") == AlreadyPaid(ref)
    assert await balance(pool, player) == 100
    report = await audit(pool)
    assert report.ok
    assert report.duplicate_payouts == 0


async def test_record_score_once_and_locks(pool: AsyncConnectionPool) -> None:
    player = await _player(pool, 100)
    round_id = await _round(pool)
    guess = ("😀", "🤖", "😎", "👻", "🍕", "🐶")
    gid = new_id()
    assert isinstance(await charge_guess(pool, player, round_id, gid, guess), Charged)
    s = score(GUESS, guess).total
    exact = exact_positions(GUESS, guess)
    assert await record_score(pool, gid, s, exact=exact) == Scored(gid, s)
    assert await record_score(pool, gid, 0) == AlreadyScored(gid, s)
    assert await record_score(pool, "JOBNOPE", 1) == UnknownGuess("JOBNOPE")
    assert await locked_positions(pool, round_id, player) == {0: "😀", 3: "👻", 5: "🐶"}


async def test_relay_sees_unadmitted_guesses_until_marked(pool: AsyncConnectionPool) -> None:
    player = await _player(pool, 100)
    round_id = await _round(pool)
    ids = [new_id() for _ in range(3)]
    for gid in ids:
        assert isinstance(await charge_guess(pool, player, round_id, gid, GUESS), Charged)
    pending = {g.id for g in await unadmitted(pool, limit=1000)}
    assert set(ids) <= pending
    assert await mark_admitted(pool, ids[:2]) == 2
    assert await mark_admitted(pool, ids[:2]) == 0
    pending = {g.id for g in await unadmitted(pool, limit=1000)}
    assert ids[2] in pending
    assert not set(ids[:2]) & pending


async def test_settlement_pays_the_pot_once(pool: AsyncConnectionPool) -> None:
    ann, bob = await _player(pool, 100), await _player(pool, 100)
    round_id = await _round(pool, price=10)
    secret = draw_secret(CLASSIC)
    plays = [(ann, secret), (bob, secret[::-1]), (ann, secret[1:] + secret[:1])]
    for who, guess in plays:
        gid = new_id()
        assert isinstance(await charge_guess(pool, who, round_id, gid, guess), Charged)
        assert isinstance(await record_score(pool, gid, score(secret, guess).total), Scored)
    assert isinstance(await settle_round(pool, round_id), NotReady)  # still open
    assert await close_round(pool, round_id) == "closed"
    payouts = await settle_round(pool, round_id)
    assert isinstance(payouts, tuple)
    assert sum(p.amount for p in payouts) == 30
    assert [p.player for p in payouts] == [ann]  # the golden rule: a perfect 600 takes the pot
    assert await settle_round(pool, round_id) == payouts  # a re-run pays identically, never twice
    assert await balance(pool, ann) == 100 - 20 + 30
    rnd = await get_round(pool, round_id)
    assert rnd is not None
    assert (rnd.state, rnd.pot) == ("settled", 0)
    assert (await audit(pool)).ok


async def test_close_waits_for_charges_in_flight_and_fixes_the_pot(pool: AsyncConnectionPool) -> None:
    players = [await _player(pool, 100) for _ in range(40)]
    round_id = await _round(pool)

    async def charge(p: str) -> object:
        return await charge_guess(pool, p, round_id, new_id(), GUESS)

    tasks = [asyncio.create_task(charge(p)) for p in players]
    await asyncio.sleep(0)  # let some charges start before the close
    state = await close_round(pool, round_id)
    results = await asyncio.gather(*tasks)
    assert state == "closed"
    charged = [r for r in results if isinstance(r, Charged)]
    refused = [r for r in results if isinstance(r, RoundRefused)]
    assert len(charged) + len(refused) == 40
    assert all(r.reason is Reason.CLOSED for r in refused)
    rnd = await get_round(pool, round_id)
    assert rnd is not None
    assert rnd.pot == 10 * len(charged)  # every charge that committed, none that did not
    assert (await audit(pool)).ok
