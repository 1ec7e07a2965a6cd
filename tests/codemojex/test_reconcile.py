"""The reconciler repairs what a fault left behind, each repair alone: a charged guess
whose job vanished is re-admitted and scored; a dead scoring job is requeued and scores;
a round past its close is settled without its close job; the close job waits with a
bound and hands over; a job that keeps dying is requeued a bounded number of times."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from codemojex.service import Admitted, Services, submit
from codemojex.service.codec import CloseRound, decode_note, derive_id, encode, note_id
from codemojex.service.reconcile import reconcile_once
from codemojex.wallet import Charged, audit, charge_guess, get_round, mark_admitted
from codemojex.workers import ScoreWorker, SettleWorker
from echomq.core import ids
from echomq.core.outcomes import Ack, Defer
from echomq.runtime.consumer import Consumer, ConsumerOptions
from tests.codemojex.game import PRICE, eventually, make_player, make_round, score_of

GUESS = ("😀", "🤖", "😎", "👻", "🍕", "🐶")
FAST = ConsumerOptions(beat_ms=50, lease_ms=1000)


async def _score_all(services: Services, done: object) -> ScoreWorker:
    worker = ScoreWorker(services)
    consumer = Consumer(services.scores, worker.handle, options=FAST)
    task = asyncio.create_task(consumer.run())
    try:
        await eventually(done, what="scoring")  # type: ignore[arg-type]
    finally:
        consumer.stop()
        await task
    return worker


async def _kill(services: Services, job_id: str) -> None:
    """Fail the job until it is dead, as five failed deliveries would."""
    for _ in range(5):
        (lease,) = await services.scores.claim(1, lease_ms=5000)
        assert lease.id == job_id
        await services.scores.retry(lease, delay_ms=0, error="OperationalError: the database is down")
    row = await services.scores.job(job_id)
    assert row is not None and row["state"] == b"dead"


async def test_a_charged_guess_whose_job_vanished_is_readmitted_and_scored(services: Services) -> None:
    player = await make_player(services.pool, PRICE)
    rid = await make_round(services.pool)
    gid = ids.generate("JOB")
    # Charged and marked admitted, but the job is not in Valkey (a failover lost it).
    assert isinstance(await charge_guess(services.pool, player, rid, gid, GUESS), Charged)
    assert await mark_admitted(services.pool, [gid]) == 1
    assert await services.scores.job(gid) is None
    young = await reconcile_once(services, min_age_s=3600)
    assert young.database_up and young.readmitted == 0  # a young guess is left to its submit
    done = await reconcile_once(services, min_age_s=0)
    assert done.readmitted == 1
    row = await services.scores.job(gid)
    assert row is not None and row["lane"].decode() == player
    assert (await reconcile_once(services, min_age_s=0)).readmitted == 0  # live now: nothing to do

    async def scored() -> bool:
        return await score_of(services.pool, gid) is not None

    worker = await _score_all(services, scored)
    assert worker.scored == 1


async def test_a_dead_scoring_job_is_requeued_once_the_database_answers(services: Services) -> None:
    player = await make_player(services.pool, PRICE)
    rid = await make_round(services.pool)
    out = await submit(services, rid, player, GUESS)
    assert isinstance(out, Admitted)
    await _kill(services, out.job_id)
    done = await reconcile_once(services, min_age_s=0)
    assert done.requeued == 1 and done.readmitted == 0  # dead is not gone: requeued, not admitted twice
    row = await services.scores.job(out.job_id)
    assert row is not None and row["state"] == b"pending" and row["failures"] == b"0"

    async def scored() -> bool:
        return await score_of(services.pool, out.job_id) is not None

    await _score_all(services, scored)
    assert (await services.scores.stats()).dead == 0


async def test_a_job_that_keeps_dying_is_requeued_a_bounded_number_of_times(services: Services) -> None:
    player = await make_player(services.pool, PRICE)
    rid = await make_round(services.pool)
    out = await submit(services, rid, player, GUESS)
    assert isinstance(out, Admitted)
    for _ in range(2):
        await _kill(services, out.job_id)
        assert (await reconcile_once(services, max_requeues=2, min_age_s=3600)).requeued == 1
    await _kill(services, out.job_id)
    assert (await reconcile_once(services, max_requeues=2, min_age_s=3600)).requeued == 0
    assert (await services.scores.stats()).dead == 1  # left dead, for a person and the audit


async def test_a_round_past_its_close_is_settled_by_the_reconciler(services: Services) -> None:
    player = await make_player(services.pool, PRICE)
    rid = await make_round(services.pool, closes_in=timedelta(seconds=2))
    out = await submit(services, rid, player, GUESS)
    assert isinstance(out, Admitted)

    async def overdue() -> bool:
        return (await reconcile_once(services, grace_s=0, min_age_s=3600)).waiting >= 1

    await eventually(overdue, what="the round to be overdue and waiting for its score")
    rnd = await get_round(services.pool, rid)
    assert rnd is not None and rnd.state == "closed"  # closed by the reconciler, not yet settled

    async def scored() -> bool:
        return await score_of(services.pool, out.job_id) is not None

    await _score_all(services, scored)
    done = await reconcile_once(services, grace_s=0, min_age_s=3600)
    assert rid in done.settled
    rnd = await get_round(services.pool, rid)
    assert rnd is not None and rnd.state == "settled"
    assert (await audit(services.pool)).ok
    assert rid not in (await reconcile_once(services, grace_s=0)).settled  # settled once


async def test_the_close_job_waits_with_a_bound_then_hands_over(services: Services) -> None:
    player = await make_player(services.pool, PRICE)
    rid = await make_round(services.pool, closes_in=timedelta(seconds=1))
    out = await submit(services, rid, player, GUESS)
    assert isinstance(out, Admitted)
    job_id = derive_id("JOB", "close", rid)
    await services.settlements.admit(job_id, encode(CloseRound(rid)), delay_ms=1000)
    worker = SettleWorker(services, close_wait_s=1.0)
    outcomes: list[object] = []

    async def handle(lease: object) -> object:
        outcome = await worker.handle(lease)  # type: ignore[arg-type]
        outcomes.append(outcome)
        return outcome

    consumer = Consumer(services.settlements, handle, options=FAST)  # type: ignore[arg-type]
    task = asyncio.create_task(consumer.run())
    try:
        async def acked() -> bool:
            row = await services.settlements.job(job_id)
            return row is not None and row["state"] == b"done"

        await eventually(acked, timeout_s=30, what="the close job to hand over")
    finally:
        consumer.stop()
        await task
    assert worker.handed_over == [rid] and outcomes[-1] == Ack()
    assert all(isinstance(o, Defer) for o in outcomes[:-1]) and worker.waits >= 1
    rnd = await get_round(services.pool, rid)
    assert rnd is not None and rnd.state == "closed"  # the guess is unscored: not settled yet


async def test_a_lost_score_notification_is_admitted_again_once(services: Services) -> None:
    first = await reconcile_once(services, min_age_s=3600)  # the watermark starts at the first pass
    assert first.notes_checked is not None and first.renotified == 0
    player = await make_player(services.pool, PRICE)
    rid = await make_round(services.pool)
    out = await submit(services, rid, player, GUESS)
    assert isinstance(out, Admitted)

    async def scored() -> bool:
        return await score_of(services.pool, out.job_id) is not None

    await _score_all(services, scored)
    nid = note_id(out.job_id)  # the player's score note of the round, admitted by this score
    # The notification's admission is lost (a failover dropped the last acknowledged writes).
    queue = services.notifications
    assert await queue.job(nid) is not None
    await queue.connector.command("DEL", queue.job_key(nid))
    await queue.connector.command("ZREM", queue.keys["pending"], nid)
    await queue.connector.command("ZREM", queue.keys["delayed"], nid)
    assert (await queue.stats()).total == 0
    done = await reconcile_once(services, notes_after=first.notes_checked, min_age_s=0)
    assert done.renotified == 1
    row = await queue.job(nid)
    assert row is not None and row["lane"].decode() == player
    note = decode_note(row["payload"])
    assert (note.kind, note.player, note.round_id) == ("score", player, rid)
    again = await reconcile_once(services, notes_after=done.notes_checked, min_age_s=0)
    assert again.renotified == 0 and (await queue.stats()).total == 1  # checked once, notified once
