"""PostgreSQL stops long enough that the game's jobs die; it starts again; every round
settles with a clean audit, and nobody acts: the app's own reconciler requeues the dead
jobs and drives the rounds to settled (issue 12, item 2).

The game: a series of two rounds on the app's tree. Guesses are charged into round 1;
PostgreSQL stops before any is scored; the app runs through the outage, so every
scoring job, round 1's close job and round 2's open job die. The consumers retry on a
short backoff (100 ms base, so jobs die in about two seconds instead of fifteen), and
the pool gives up a checkout after 2 s and a wallet call after 1 s; everything else is
the game's own code.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

from codemojex.domain.errors import DatabaseError
from codemojex.game.app import App
from codemojex.game.report import check_run
from codemojex.infra.pg import PgServer, open_pool
from codemojex.service import Admitted, Services, open_round, round_id, submit
from codemojex.service.codec import OpenRound
from codemojex.service.reconcile import Reconciler
from codemojex.wallet import RetryPolicy, get_round, migrate, retry_policy
from echomq import AsyncConnector
from echomq.core import ids
from echomq.core.outcomes import BackoffPolicy
from echomq.runtime.consumer import ConsumerOptions
from tests.codemojex.game import PRICE, eventually, make_player

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

log = logging.getLogger("test.outage")
SHORT = BackoffPolicy(base_ms=100, max_ms=1000)
PLAYERS, GUESSES = 12, 1


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    """Outside pytest's basetemp (see tests/codemojex/test_play_cli.py)."""
    with tempfile.TemporaryDirectory(prefix="codemojex-outage-") as tmp:
        yield Path(tmp)


@pytest.fixture
def own_pg(tmp_path: Path) -> Iterator[PgServer]:
    server = PgServer(data_dir=tmp_path / "pgdata")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def own_pool(own_pg: PgServer) -> AsyncIterator[AsyncConnectionPool]:
    pool = await open_pool(own_pg.url, min_size=2, max_size=10, checkout_timeout=2.0)
    try:
        await migrate(pool)
        yield pool
    finally:
        await pool.close()


async def test_postgres_outage_kills_jobs_and_every_round_still_settles(
    own_pg: PgServer, own_pool: AsyncConnectionPool, conn: AsyncConnector, qname: str, tmp_path: Path
) -> None:
    # Wallet calls give up after 1 s (their default bound is 30 s) so that jobs die quickly.
    with retry_policy(RetryPolicy(deadline_s=1.0)):
        services = Services(own_pool, conn, suffix=f"-{qname}")
        series = ids.generate("SER")
        rids = [round_id(series, i) for i in range(2)]
        first = OpenRound(series, rids[0], 0, 2, 6000, 0, PRICE, "classic")
        await open_round(services, first)  # what round 1's open job does; it schedules the rest
        players = [await make_player(own_pool, PRICE * GUESSES) for _ in range(PLAYERS)]
        admitted = []
        for p in players:
            for n in range(GUESSES):
                guess = ["😀", "😎", "🤖", "👻", "🐱", ("🐶", "🍕", "🚀")[n]]
                out = await submit(services, rids[0], p, guess)
                if isinstance(out, Admitted):  # a loaded machine may reach the close first
                    admitted.append(out.job_id)
        assert admitted

        url = own_pg.url
        own_pg.stop()  # PostgreSQL down before any guess is scored
        down_at = time.monotonic()
        opts = {name: ConsumerOptions(beat_ms=100, lease_ms=10_000, concurrency=8, backoff=SHORT)
                for name in ("score", "settle", "notify")}
        app = App(services, options=opts, reconciler=Reconciler(services, interval_s=0.5, min_age_s=2.0,
                                                                grace_s=2.0))
        app.settler.close_wait_s = 5.0
        tree = asyncio.create_task(app.run())
        try:
            async def all_dead() -> bool:  # every scoring job, round 1's close and round 2's open
                s, t = await services.scores.stats(), await services.settlements.stats()
                return s.dead == len(admitted) and t.dead == 2

            await eventually(all_dead, timeout_s=60, what="the game's jobs to die")
            died_s = time.monotonic() - down_at

            restarted = PgServer(data_dir=tmp_path / "pgdata")
            assert restarted.start() == url  # the same socket: the pool reconnects by itself
            up_at = time.monotonic()
            try:
                async def settled() -> bool:
                    for rid in rids:
                        try:
                            rnd = await get_round(own_pool, rid)
                        except (psycopg.Error, DatabaseError):  # the pool is still reconnecting
                            return False
                        if rnd is None or rnd.state != "settled":
                            return False
                    for queue in (services.notifications, services.scores):  # every ack in too
                        s = await queue.stats()
                        if s.pending + s.active + s.delayed:
                            return False
                    return True

                await eventually(settled, timeout_s=90, what="every round to settle after the outage")
                recovered_s = time.monotonic() - up_at
                checks = await check_run(own_pool, rids)
                assert checks.ok, checks.failures
                assert checks.charged == checks.scored == len(admitted)
                assert app.reconciler.requeued >= len(admitted) + 2  # nobody else requeued anything
                s = await services.scores.stats()
                assert s.dead == 0 and s.done == len(admitted)
                log.warning("outage timeline: jobs dead %.1fs after the stop; every round settled "
                            "%.1fs after the restart (round 2 runs its full 6 s after opening)",
                            died_s, recovered_s)
                print(f"\nOUTAGE TIMELINE: dead after {died_s:.1f}s; all rounds settled {recovered_s:.1f}s "
                      f"after restart; requeued {app.reconciler.requeued}, reconciler settled "
                      f"{app.reconciler.settled}")
            finally:
                app.stop()
                await tree
                restarted.stop()
        finally:
            if not tree.done():
                app.stop()
                await tree
