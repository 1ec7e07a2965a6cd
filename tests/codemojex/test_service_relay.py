"""The charge's outbox (issue 28, item 1): a guess's job is written into ``cm_outbox`` in the
charge's own transaction, and echomq's relay admits it. A process killed between the commit
and its own admission leaves the row, which the relay admits under the guess's id, scored
once; a guess ``submit`` admitted itself is a DUPLICATE to the relay; a refused charge
leaves no row."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from codemojex.domain.errors import Reason
from codemojex.service import Admitted, Services, submit
from codemojex.wallet import OUTBOX
from codemojex.workers import ScoreWorker
from echomq.outbox import OutboxRelay
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


async def _rows(services: Services, guess_id: str) -> int:
    async with services.pool.connection() as conn:
        row = await (await conn.execute(f"SELECT count(*) FROM {OUTBOX.quoted} WHERE job_id = %s",
                                        (guess_id,))).fetchone()
    assert row is not None
    return int(row[0])


async def test_kill_between_charge_and_admission_then_the_outbox_admits_and_it_scores_once(
    services: Services, db_url: str, valkey_url: str, qname: str
) -> None:
    player = await make_player(services.pool, PRICE * 2)
    rid = await make_round(services.pool)
    await run_child("submit", rid, player, db_url=db_url, valkey_url=valkey_url, suffix=f"-{qname}")

    async with services.pool.connection() as conn:  # paid, recorded, never admitted
        cur = await conn.execute("SELECT id FROM guesses WHERE player_id = %s", (player,))
        (lost,) = await cur.fetchall()
    gid = str(lost[0])
    assert await services.scores.job(gid) is None and await _rows(services, gid) == 1
    async with OutboxRelay(db_url, services.connector, table=OUTBOX.name) as relay:
        first = await relay.drain()
        second = await relay.drain()
    assert first.admitted >= 1 and second.claimed == 0 and await _rows(services, gid) == 0
    row = await services.scores.job(gid)
    assert row is not None and row["lane"].decode() == player

    worker = ScoreWorker(services)
    consumer = Consumer(services.scores, worker.handle, options=ConsumerOptions(beat_ms=50, lease_ms=1000))
    task = asyncio.create_task(consumer.run())
    try:
        async def scored() -> bool:
            return await score_of(services.pool, gid) is not None and (
                await services.scores.stats()).done == 1

        await eventually(scored, what="the relayed guess to be scored")
    finally:
        consumer.stop()
        await task
    assert worker.scored == 1
    assert (await services.notifications.stats()).total == 1  # one score notification


async def test_the_relay_finds_a_guess_submit_admitted_a_duplicate(services: Services, db_url: str) -> None:
    player = await make_player(services.pool, PRICE)
    rid = await make_round(services.pool)
    out = await submit(services, rid, player, "🍕🍩🚀⚽🎸❤️")
    assert isinstance(out, Admitted) and out.queued
    assert await _rows(services, out.job_id) == 1  # committed with the charge
    async with OutboxRelay(db_url, services.connector, table=OUTBOX.name) as relay:
        report = await relay.drain()
    assert report.duplicates >= 1 and await _rows(services, out.job_id) == 0
    assert (await services.scores.stats()).total == 1
    refused = await submit(services, rid, player, "🍕🍩🚀⚽🎸❤️")  # no coins left: no charge, no row
    assert refused is Reason.INSUFFICIENT
    async with services.pool.connection() as conn:
        row = await (await conn.execute(f"SELECT count(*) FROM {OUTBOX.quoted} o JOIN guesses g"
                                        " ON g.id = o.job_id WHERE g.player_id = %s", (player,))).fetchone()
    assert row == (0,)
