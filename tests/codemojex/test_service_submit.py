"""``submit`` on real PostgreSQL and Valkey: the closed errors (the seed's five and
``unavailable``), success, locks, a race."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

import codemojex.service.guesses as guesses_mod
from codemojex.domain import format_guess
from codemojex.domain.errors import Reason
from codemojex.service import Admitted, Services, submit
from codemojex.service.codec import decode_guess
from codemojex.wallet import RetryPolicy, balance, close_round, record_score, retry_policy
from tests.codemojex.game import PRICE, SECRET, books, make_player, make_round
from tests.codemojex.pgfaults import dbname_of, refused

GUESS = ("🍕", "🍩", "🚀", "⚽", "🎸", "❤️")


@pytest.fixture
def mint_counter(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every JOB id ``submit`` mints, recorded."""
    minted: list[str] = []
    real = guesses_mod.ids.generate

    def counting(kind: str) -> str:
        out = real(kind)
        if kind == "JOB":
            minted.append(out)
        return out

    monkeypatch.setattr(guesses_mod.ids, "generate", counting)
    return minted


@pytest.mark.parametrize("reason", list(Reason))
async def test_each_error_mints_nothing_and_charges_nothing(
    services: Services, reason: Reason, mint_counter: list[str], pg_url: str
) -> None:
    player = await make_player(services.pool, PRICE * 5)
    rid = await make_round(services.pool)
    guess: object = format_guess(GUESS)
    if reason is Reason.NO_ROUND:
        rid = "RND-does-not-exist"
    elif reason is Reason.CLOSED:
        assert await close_round(services.pool, rid) == "closed"
    elif reason is Reason.EXPIRED:
        rid = await make_round(services.pool, opens_in=timedelta(hours=-2), closes_in=timedelta(seconds=-1))
    elif reason is Reason.BAD_GUESS:
        guess = "🍕🍩🚀 not emojis"
    else:
        player = await make_player(services.pool, PRICE - 1)
    before = await books(services)
    if reason is Reason.UNAVAILABLE:  # PostgreSQL refuses every connection past the bound
        async with refused(pg_url, dbname_of(services.pool)):
            with retry_policy(RetryPolicy(deadline_s=1.0)):
                assert await submit(services, rid, player, guess) is reason
    else:
        assert await submit(services, rid, player, guess) is reason
    assert await books(services) == before  # no guess row, no movement, no ledger leg, no job
    if reason is not Reason.INSUFFICIENT:
        assert mint_counter == []  # refused before the success branch
    # (insufficient is decided by the charge, inside the success branch: the id minted for
    # it was never written anywhere, as the unchanged books show)


async def test_success_charges_and_admits_onto_the_players_serial_lane(services: Services) -> None:
    player = await make_player(services.pool, PRICE * 3)
    rid = await make_round(services.pool)
    out = await submit(services, rid, player, "🍕 🍩 🚀 ⚽ 🎸 ❤")  # ❤ without VS16: the set's spelling wins
    assert isinstance(out, Admitted)
    assert out.queued and out.guess == GUESS and out.balance == PRICE * 2
    assert await balance(services.pool, player) == PRICE * 2
    row = await services.scores.job(out.job_id)
    assert row is not None
    assert row["lane"].decode() == player and row["serial"] == b"1"
    job = decode_guess(row["payload"])
    assert (job.round_id, job.player, job.emojis) == (rid, player, GUESS)
    async with services.pool.connection() as conn:
        admitted = await (await conn.execute(
            "SELECT admitted_at IS NOT NULL, charged FROM guesses WHERE id = %s", (out.job_id,))).fetchone()
    assert admitted == (True, PRICE)


async def test_locked_positions_are_overlaid_before_the_charge(services: Services) -> None:
    player = await make_player(services.pool, PRICE * 2)
    rid = await make_round(services.pool)
    first = await submit(services, rid, player, list(SECRET[:2]) + list(GUESS[2:]))
    assert isinstance(first, Admitted)
    await record_score(services.pool, first.job_id, 200, exact={0: SECRET[0], 1: SECRET[1]})
    second = await submit(services, rid, player, GUESS)
    assert isinstance(second, Admitted)
    assert second.guess == (SECRET[0], SECRET[1], *GUESS[2:])
    job = await services.scores.job(second.job_id)
    assert job is not None and decode_guess(job["payload"]).emojis == second.guess


async def test_200_concurrent_guesses_from_one_player_exactly_37_succeed(services: Services) -> None:
    player = await make_player(services.pool, 37 * PRICE)
    rid = await make_round(services.pool)
    results = await asyncio.gather(*(submit(services, rid, player, GUESS) for _ in range(200)))
    admitted = [r for r in results if isinstance(r, Admitted)]
    assert len(admitted) == 37
    assert [r for r in results if not isinstance(r, Admitted)] == [Reason.INSUFFICIENT] * 163
    assert await balance(services.pool, player) == 0
    assert len({r.job_id for r in admitted}) == 37
    assert (await services.scores.stats()).total == 37  # one job per paid guess, no more
    assert sorted(r.balance for r in admitted) == [PRICE * i for i in range(37)]  # never below zero
