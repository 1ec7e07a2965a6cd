"""The reconciler covers every game queue and all its work (issue 25, item 3): dead jobs on
``cm.commands`` too, pages from a cursor so nothing it gave up on (and no round that cannot
settle yet) starves newer work, give-ups kept in PostgreSQL and reported with the job id and
cause, and a lost open job of a running series admitted again."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta

import pytest

from codemojex.service import Admitted, SeriesSettings, Services, start_series, submit
from codemojex.service.reconcile import Cursor, Reconciler, gave_up_counts, reconcile_once
from codemojex.service.rounds import open_job_id, round_id
from codemojex.wallet import get_round, repairs
from echomq import AsyncQueue, ids
from tests.codemojex.game import PRICE, make_player, make_round

GUESS = ("😀", "🤖", "😎", "👻", "🍕", "🐶")


async def _dead(queue: AsyncQueue, job_id: str, error: str = "OperationalError: database down") -> None:
    """Fail ``job_id`` until it is dead."""
    for _ in range(50):
        row = await queue.job(job_id)
        assert row is not None
        if row["state"] == b"dead":
            return
        leases = await queue.claim(1, lease_ms=5000)
        assert [lease.id for lease in leases] == [job_id]
        await queue.retry(leases[0], delay_ms=0, error=error)
    raise AssertionError(f"{job_id} never died")


async def test_a_dead_command_is_requeued(services: Services) -> None:
    """A /start that died in a PostgreSQL outage is answered after it: cm.commands is repaired."""
    job_id = ids.generate("JOB")
    await services.commands.admit(job_id, b'{"update": 1}', lane="tg:1", serial=True)
    await _dead(services.commands, job_id)
    done = await reconcile_once(services, min_age_s=3600)
    assert done.requeued == 1
    row = await services.commands.job(job_id)
    assert row is not None and row["state"] == b"pending"


async def test_a_give_up_is_kept_in_postgresql_logged_and_counted(
        services: Services, caplog: pytest.LogCaptureFixture) -> None:
    player = await make_player(services.pool, PRICE)
    out = await submit(services, await make_round(services.pool), player, GUESS)
    assert isinstance(out, Admitted)
    for _ in range(2):  # two deaths, two requeues, each by a new reconciler (a restart)
        await _dead(services.scores, out.job_id)
        assert (await reconcile_once(services, cursor=Cursor(), max_requeues=2, min_age_s=3600)).requeued == 1
    await _dead(services.scores, out.job_id, error="ValueError: this job cannot work")
    with caplog.at_level(logging.ERROR, logger="codemojex.reconcile"):
        third = await reconcile_once(services, cursor=Cursor(), max_requeues=2, min_age_s=3600)
    assert third.requeued == 0 and [(g.queue, g.job_id) for g in third.gave_up] == [
        (services.scores.name, out.job_id)]
    line = next(r.getMessage() for r in caplog.records if "gave up" in r.getMessage())
    assert out.job_id in line and "ValueError: this job cannot work" in line
    assert (await gave_up_counts(services)).get(services.scores.name) == 1
    # A restarted reconciler remembers: no requeue, no second give-up, no second log line.
    again = await reconcile_once(services, cursor=Cursor(), max_requeues=2, min_age_s=3600)
    assert again.requeued == 0 and again.gave_up == []
    assert (await services.scores.job(out.job_id) or {}).get("state") == b"dead"


async def test_dead_jobs_given_up_in_front_never_starve_a_newer_death(services: Services) -> None:
    queue = services.notifications
    hopeless = [ids.generate("JOB") for _ in range(7)]
    for job_id in hopeless:
        await queue.admit(job_id, b"{}")
        await _dead(queue, job_id)
    await repairs.give_up(services.pool, queue.name, [(j, "seeded") for j in hopeless])
    fresh = ids.generate("JOB")
    await queue.admit(fresh, b"{}")
    await _dead(queue, fresh)
    reconciler = Reconciler(services, min_age_s=3600)
    passes = 0
    while passes < 10:  # pages of 2, one page a pass: the cursor walks past the seven
        passes += 1
        done = await reconcile_once(services, cursor=reconciler.cursor, limit=2, pages=1, min_age_s=3600)
        if done.requeued:
            break
    assert done.requeued == 1 and passes >= 4  # it took the cursor moving on to reach it
    row = await queue.job(fresh)
    assert row is not None and row["state"] == b"pending"
    assert (await queue.stats()).dead == 7


async def test_a_round_that_cannot_settle_yet_never_starves_the_rounds_after_it(services: Services) -> None:
    player = await make_player(services.pool, PRICE)
    waiting = await make_round(services.pool, closes_in=timedelta(seconds=1))
    assert isinstance(await submit(services, waiting, player, GUESS), Admitted)  # never scored here
    rnd = await get_round(services.pool, waiting)
    assert rnd is not None
    await asyncio.sleep(max(0.0, (rnd.closes_at - datetime.now(UTC)).total_seconds() + 0.1))
    later = await make_round(services.pool, closes_in=timedelta(milliseconds=-50))  # closes after it
    cursor = Cursor()
    settled: list[str] = []
    for _ in range(10):  # one overdue round a page
        settled += (await reconcile_once(services, cursor=cursor, limit=1, grace_s=0, min_age_s=3600)).settled
        if later in settled:
            break
    assert later in settled and waiting not in settled


async def test_a_lost_open_job_of_a_running_series_is_admitted_by_a_pass(services: Services) -> None:
    status = await start_series(services, SeriesSettings(round_ms=60_000), name=f"s{services.suffix}")
    lost = Services(services.pool, services.connector, suffix=services.suffix + "-lost")  # Valkey lost it
    done = await reconcile_once(lost, min_age_s=3600)
    assert done.kicked >= 1
    job = await lost.settlements.job(open_job_id(round_id(status.id, 0)))
    assert job is not None
    assert (await reconcile_once(lost, min_age_s=3600)).kicked == 0  # there now: a DUPLICATE
