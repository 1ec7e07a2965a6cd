"""The whole game on a local 3+3 Valkey Cluster (issue 12, item 7): every game queue and
the cache tier on the cluster connector, and a primary killed with kill -9 in the middle
of play. No guess and no coin is lost: every charged guess is scored, every round
settles, every score is notified, the audit is clean. (The last acknowledged writes of
a killed primary may be lost by asynchronous replication; PostgreSQL is the truth of
the game, and the reconciler re-admits whatever the queue lost.)"""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator, Iterator

import pytest
from psycopg_pool import AsyncConnectionPool
from rich.console import Console

from codemojex.game.play import PlayOptions, play
from codemojex.game.report import check_run, delivered_score_notes
from codemojex.infra.pg import open_pool
from codemojex.infra.servers import cluster_url
from codemojex.service import Services
from codemojex.wallet import migrate
from echomq import AsyncClusterConnector
from echomq.servers.local_cluster import LocalCluster
from tests.codemojex.game import eventually

pytestmark = [pytest.mark.slow, pytest.mark.cluster, pytest.mark.timeout(600)]


@pytest.fixture
def own_cluster() -> Iterator[LocalCluster]:
    """A cluster of this test's own: it kills a primary."""
    with LocalCluster(primaries=3, replicas_per_primary=1, node_timeout_ms=2000) as cluster:
        yield cluster


@pytest.fixture
async def game_pool(db_url: str) -> AsyncIterator[AsyncConnectionPool]:
    pool = await open_pool(db_url, min_size=2, max_size=16)
    try:
        await migrate(pool)
        yield pool
    finally:
        await pool.close()


async def _charged(pool: AsyncConnectionPool) -> int:
    async with pool.connection() as conn:
        row = await (await conn.execute("SELECT count(*) FROM guesses")).fetchone()
    return int(row[0]) if row else 0


async def test_the_game_on_a_cluster_loses_nothing_when_a_primary_is_killed(
    own_cluster: LocalCluster, game_pool: AsyncConnectionPool
) -> None:
    connector = AsyncClusterConnector.from_url(cluster_url(own_cluster))
    services = Services(game_pool, connector)
    opts = PlayOptions(players=20, guesses=3, rounds=2, round_s=8.0)
    victim = own_cluster.primary_for_key(services.scores.keys["pending"])  # the scoring shard

    async def kill_mid_play() -> int:
        async def under_way() -> bool:
            return await _charged(game_pool) >= 1

        await eventually(under_way, timeout_s=120, what="round 1 under way")
        pid = victim.pid
        assert pid is not None
        own_cluster.kill_node(victim)  # kill -9, in the middle of round 1's submissions
        return pid

    killer = asyncio.create_task(kill_mid_play())
    try:
        app, tally, _ = await play(services, opts, Console(file=io.StringIO()))
        killed = await asyncio.wait_for(killer, 1)
        assert killed and not victim.running
        notes = await delivered_score_notes(services, tally.round_ids)
        checks = await check_run(game_pool, tally.round_ids, score_notes=notes)
        assert checks.ok, checks.failures
        assert checks.charged == checks.scored == notes and checks.unadmitted == 0
        assert checks.charged >= 1
        assert app.cache.games.written >= 1  # the cache tier wrote on the cluster
        cached = await app.cache.games.get(tally.round_ids[-1])
        assert cached is not None and cached["state"] == "settled"
    finally:
        killer.cancel()
        await asyncio.gather(killer, return_exceptions=True)
        await connector.aclose()
