"""Kill -9 a scoring or settlement consumer mid-job: the job re-runs after its lease
expires, and its effect (score, payout) is applied once."""

from __future__ import annotations

import asyncio

import pytest

from codemojex.domain import score, settle
from codemojex.domain.payouts import ScoredGuess
from codemojex.service import Admitted, Services, closed_key, submit
from codemojex.service.codec import CloseRound, derive_id, encode
from codemojex.wallet import audit, get_round, record_score
from codemojex.workers import ScoreWorker, SettleWorker
from echomq.core.outcomes import Outcome
from echomq.runtime.consumer import Consumer, ConsumerOptions
from tests.codemojex.game import PRICE, SECRET, eventually, make_player, make_round, score_of
from tests.codemojex.test_service_relay import run_child

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]

GUESS = ("😀", "🤖", "😎", "👻", "🍕", "🐶")
FAST = ConsumerOptions(beat_ms=50, lease_ms=1000)  # the lease the child held expires within ~1 s


async def _drain(queue_consumer: Consumer, done: object) -> None:
    task = asyncio.create_task(queue_consumer.run())
    try:
        await eventually(done, what="the re-run to finish")  # type: ignore[arg-type]
    finally:
        queue_consumer.stop()
        await task


async def test_scoring_consumer_killed_mid_job_scores_once(
    services: Services, db_url: str, valkey_url: str, qname: str
) -> None:
    player = await make_player(services.pool, PRICE)
    rid = await make_round(services.pool)
    out = await submit(services, rid, player, GUESS)
    assert isinstance(out, Admitted)
    await run_child("score", db_url=db_url, valkey_url=valkey_url, suffix=f"-{qname}")
    expected = score(SECRET, GUESS).total
    assert await score_of(services.pool, out.job_id) == expected  # the effect happened...
    row = await services.scores.job(out.job_id)
    assert row is not None and row["state"] == b"active"  # ...but the job was never acked

    worker = ScoreWorker(services)

    async def done() -> bool:
        job = await services.scores.job(out.job_id)
        return job is not None and job["state"] == b"done"

    await _drain(Consumer(services.scores, worker.handle, options=FAST), done)
    job = await services.scores.job(out.job_id)
    assert job is not None and job["attempts"] == b"2"  # it ran again
    assert worker.scored == 0  # the re-run found it scored
    assert await score_of(services.pool, out.job_id) == expected
    assert (await services.notifications.stats()).total == 1  # notified once


@pytest.mark.parametrize("mode", ["settle-before", "settle-after"])
async def test_settlement_consumer_killed_mid_job_pays_once(
    services: Services, db_url: str, valkey_url: str, qname: str, mode: str
) -> None:
    rid = await make_round(services.pool)
    for _ in range(3):
        player = await make_player(services.pool, PRICE)
        out = await submit(services, rid, player, GUESS)
        assert isinstance(out, Admitted)
        await record_score(services.pool, out.job_id, score(SECRET, out.guess).total)
    job_id = derive_id("JOB", "close", rid)
    await services.settlements.admit(job_id, encode(CloseRound(rid)))
    await run_child(mode, db_url=db_url, valkey_url=valkey_url, suffix=f"-{qname}")

    assert await services.connector.command("EXISTS", closed_key(rid)) == 1  # the one-shot is taken
    rnd = await get_round(services.pool, rid)
    assert rnd is not None and rnd.state == ("closed" if mode == "settle-before" else "settled")

    async def done() -> bool:
        job = await services.settlements.job(job_id)
        return job is not None and job["state"] == b"done"

    worker = SettleWorker(services)

    async def handle(lease: object) -> Outcome:
        return await worker.handle(lease)  # type: ignore[arg-type]

    await _drain(Consumer(services.settlements, handle, options=FAST), done)
    async with services.pool.connection() as conn:
        rows = await (await conn.execute(
            "SELECT id, player_id, score, seq FROM guesses WHERE round_id = %s", (rid,))).fetchall()
        paid = await (await conn.execute(
            "SELECT count(*), sum(amount) FROM movements WHERE kind = 'payout' AND ref LIKE %s",
            (f"payout:{rid}:%",))).fetchone()
    expected = settle(PRICE * 3, [ScoredGuess(str(i), str(p), int(s), int(q)) for i, p, s, q in rows])
    assert paid == (len(expected), PRICE * 3)  # each winner once, the pot exactly
    assert (await services.notifications.stats()).total == len(expected)
    assert (await audit(services.pool)).ok
