"""The relay: a guess whose process died between the charge and the admission is
admitted by the relay under its own id, and scored once."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from codemojex.service import Admitted, Services, relay_once, submit
from codemojex.wallet import unadmitted
from codemojex.workers import ScoreWorker
from echomq.runtime.consumer import Consumer, ConsumerOptions
from tests.codemojex.game import PRICE, eventually, make_player, make_round, score_of

ROOT = Path(__file__).resolve().parents[2]


async def run_child(mode: str, *args: str, db_url: str, valkey_url: str, suffix: str) -> int:
    """Run ``crash_child`` (without blocking the event loop) and check it died by SIGKILL."""
    env = dict(os.environ, CMX_PG_URL=db_url, CMX_VALKEY_URL=valkey_url, CMX_SUFFIX=suffix)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.codemojex.crash_child", mode, *args,
        cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == -signal.SIGKILL, err.decode()[-2000:]
    return proc.returncode


async def test_kill_between_charge_and_admission_then_relay_admits_and_it_scores_once(
    services: Services, db_url: str, valkey_url: str, qname: str
) -> None:
    player = await make_player(services.pool, PRICE * 2)
    rid = await make_round(services.pool)
    await run_child("submit", rid, player, db_url=db_url, valkey_url=valkey_url, suffix=f"-{qname}")

    (lost,) = await unadmitted(services.pool)  # paid, recorded, never admitted
    assert (lost.round_id, lost.player) == (rid, player)
    assert await services.scores.job(lost.id) is None
    assert await relay_once(services, min_age_ms=0) == 1
    assert await relay_once(services, min_age_ms=0) == 0  # marked: nothing left to relay
    row = await services.scores.job(lost.id)
    assert row is not None and row["lane"].decode() == player

    worker = ScoreWorker(services)
    consumer = Consumer(services.scores, worker.handle, options=ConsumerOptions(beat_ms=50, lease_ms=1000))
    task = asyncio.create_task(consumer.run())
    try:
        async def scored() -> bool:
            return await score_of(services.pool, lost.id) is not None and (
                await services.scores.stats()).done == 1

        await eventually(scored, what="the relayed guess to be scored")
    finally:
        consumer.stop()
        await task
    assert worker.scored == 1
    assert (await services.notifications.stats()).total == 1  # one score notification


async def test_relay_is_idempotent_against_a_guess_submit_already_admitted(services: Services) -> None:
    player = await make_player(services.pool, PRICE)
    rid = await make_round(services.pool)
    out = await submit(services, rid, player, "🍕🍩🚀⚽🎸❤️")
    assert isinstance(out, Admitted)
    async with services.pool.connection() as conn:  # as if the mark after admission was lost
        await conn.execute("UPDATE guesses SET admitted_at = NULL WHERE id = %s", (out.job_id,))
    assert await relay_once(services, min_age_ms=60_000) == 0  # too young: submit may be admitting it
    assert await relay_once(services, min_age_ms=0) == 1  # DUPLICATE on the queue, then marked
    assert (await services.scores.stats()).total == 1
