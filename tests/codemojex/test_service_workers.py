"""The consumers' handlers: scoring once, settlement once (also concurrently), rounds on schedule."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from codemojex.domain import score, settle
from codemojex.domain.errors import Reason
from codemojex.domain.payouts import ScoredGuess
from codemojex.service import (
    Admitted,
    RoundPlan,
    Services,
    close_and_settle,
    closed_key,
    round_id,
    schedule,
    submit,
)
from codemojex.service.codec import decode_note
from codemojex.wallet import NotReady, audit, get_round, locked_positions, record_score
from codemojex.workers import ScoreWorker
from echomq import Ack
from echomq.core.model import Lease
from tests.codemojex.game import PRICE, SECRET, eventually, make_player, make_round, score_of

GUESS = ("😀", "🤖", "😎", "👻", "🍕", "🐶")  # positions 0, 3, 5 exact
OTHER = ("🐶", "😀", "🤖", "😎", "👻", "🐱")


async def _claim(services: Services) -> Lease:
    (lease,) = await services.scores.claim(1, lease_ms=10_000)
    return lease


async def test_a_guess_delivered_twice_is_scored_and_notified_once(services: Services) -> None:
    player = await make_player(services.pool, PRICE)
    rid = await make_round(services.pool)
    out = await submit(services, rid, player, GUESS)
    assert isinstance(out, Admitted)
    lease = await _claim(services)
    worker = ScoreWorker(services, note_delay_ms=0)
    assert isinstance(await worker.handle(lease), Ack)  # scored: completes, not a Backoff
    expected = score(SECRET, GUESS).total
    assert await score_of(services.pool, out.job_id) == expected
    assert await locked_positions(services.pool, rid, player) == {0: "😀", 3: "👻", 5: "🐶"}
    async with services.pool.connection() as conn:  # a different stored score must survive a re-run
        await conn.execute("UPDATE guesses SET score = 7 WHERE id = %s", (out.job_id,))
    assert isinstance(await worker.handle(lease), Ack)  # the re-delivery completes too
    assert await score_of(services.pool, out.job_id) == 7
    assert worker.scored == 1
    (note,) = await services.notifications.browse("pending")  # one note: the re-run found it waiting
    told = decode_note(note.row["payload"])  # it tells the player's untold scores when delivered
    assert (told.kind, told.player, told.round_id, told.guess) == ("score", player, rid, "")


async def _round_with_scored_guesses(services: Services) -> str:
    rid = await make_round(services.pool)
    players = [await make_player(services.pool, PRICE * 3) for _ in range(4)]
    for i, p in enumerate(players):
        for j in range(2):
            out = await submit(services, rid, p, OTHER if (i + j) % 2 else GUESS)
            assert isinstance(out, Admitted)
            await record_score(services.pool, out.job_id, score(SECRET, out.guess).total)
    return rid


async def test_settlement_run_twice_and_concurrently_pays_identically_and_once(services: Services) -> None:
    rid = await _round_with_scored_guesses(services)
    runs = await asyncio.gather(*(close_and_settle(services, rid) for _ in range(4)))
    again = await close_and_settle(services, rid)
    assert all(r == runs[0] for r in runs) and again == runs[0]
    payouts = runs[0]
    assert isinstance(payouts, tuple) and len(payouts) == 4  # everyone scored something
    async with services.pool.connection() as conn:
        rows = await (await conn.execute(
            "SELECT id, player_id, score, seq FROM guesses WHERE round_id = %s", (rid,))).fetchall()
        paid = await (await conn.execute(
            "SELECT count(*), sum(amount) FROM movements WHERE kind = 'payout' AND ref LIKE %s",
            (f"payout:{rid}:%",))).fetchone()
    expected = settle(PRICE * 8, [ScoredGuess(str(i), str(p), int(s), int(q)) for i, p, s, q in rows])
    assert payouts == expected
    assert paid == (len(expected), PRICE * 8)  # one movement per winner, the whole pot, once
    assert (await services.notifications.stats()).total == len(expected)  # one note per payout
    assert (await audit(services.pool)).ok
    assert await services.connector.command("EXISTS", closed_key(rid)) == 1


async def test_settlement_waits_until_every_charged_guess_is_scored(services: Services) -> None:
    rid = await make_round(services.pool)
    player = await make_player(services.pool, PRICE)
    out = await submit(services, rid, player, GUESS)
    assert isinstance(out, Admitted)
    waiting = await close_and_settle(services, rid)
    assert isinstance(waiting, NotReady) and waiting.unscored == 1
    assert await submit(services, rid, player, GUESS) is Reason.CLOSED  # no charge after the close
    await record_score(services.pool, out.job_id, 300)
    payouts = await close_and_settle(services, rid)
    assert isinstance(payouts, tuple) and [(p.player, p.amount) for p in payouts] == [(player, PRICE)]


async def test_rounds_open_and_close_on_schedule_one_after_another(services: Services) -> None:
    from codemojex.game.app import App

    app = App(services)
    tree = asyncio.create_task(app.run())
    try:
        series = await schedule(services, RoundPlan(count=2, duration_ms=600, gap_ms=0, price=PRICE))
        first, second = round_id(series, 0), round_id(series, 1)

        async def settled(rid: str) -> bool:
            rnd = await get_round(services.pool, rid)
            return rnd is not None and rnd.state == "settled"

        await eventually(lambda: settled(first), what="round 1 settled")
        await eventually(lambda: settled(second), what="round 2 settled")
        r1, r2 = await get_round(services.pool, first), await get_round(services.pool, second)
        assert r1 is not None and r2 is not None
        assert r2.opens_at >= r1.closes_at - timedelta(milliseconds=50)  # one after another
        assert r1.closes_at - r1.opens_at == timedelta(milliseconds=600)
        # The round is settled in PostgreSQL before its job is acknowledged: wait for the ack.
        async def four_done() -> bool:
            return (await services.settlements.stats()).done >= 4

        await eventually(four_done, what="the last settlement job acknowledged")
        stats = await services.settlements.stats()
        assert stats.done == 4 and stats.total == 4  # two opens and two closes, each once (derived ids)
        cached = await app.cache.games.get(second)
        assert cached is not None and cached["state"] == "settled" and len(cached["secret"].split()) == 6
    finally:
        app.stop()
        await tree
