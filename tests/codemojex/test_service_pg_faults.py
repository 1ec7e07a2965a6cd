"""The wallet and the service ride out PostgreSQL faults (issue 12, item 8).

On the session's embedded server: ``pg_ctl restart -m immediate`` (as the server's own
system user) and ``pg_terminate_backend`` of every session, at a round's close and in
the middle of submission, 5 times each (ten rounds, each faulted twice). Every round
settles, the audit is clean, every accepted guess is charged exactly once, every
submission is accepted (none ``unavailable``) and no exception reaches the caller.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

from codemojex.domain import format_guess
from codemojex.domain.errors import Reason
from codemojex.infra.pg import PgServer, open_pool
from codemojex.service import Admitted, Services, close_and_settle, submit
from codemojex.wallet import STATS, audit, migrate, record_score, retry
from codemojex.wallet.admin import create_database, drop_database
from echomq import AsyncConnector
from tests.codemojex.game import PRICE, SECRET, make_player, make_round
from tests.codemojex.pgfaults import dbname_of, terminate_backends

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


async def _rows(pool: AsyncConnectionPool, query: str, *args: object) -> list[tuple[Any, ...]]:
    async with pool.connection() as conn:
        cur = await conn.execute(query.encode(), args)
        return list(await cur.fetchall())


@pytest.fixture
def own_pg(pg_server: PgServer) -> PgServer:
    """The session's server: restarting it is safe (tests run one at a time and hold no
    connection across tests); an external server is not ours to restart."""
    if not pg_server.embedded:
        pytest.skip("restarts need the embedded server, not an external one")
    return pg_server


# Ten rounds; each takes its fault twice: in the middle of submission and at its close.
ROUNDS = ["restart", "terminate"] * 5
PLAYERS, GUESSES = 4, 4


async def test_rounds_settle_through_restarts_and_terminated_backends(
    own_pg: PgServer, conn: AsyncConnector, qname: str
) -> None:
    url = await create_database(own_pg.url, f"faults_{qname.lower().replace('-', '_')}")
    pool = await open_pool(url, min_size=2, max_size=8)
    services = Services(pool, conn, suffix=f"-{qname}")
    faults = {"restart": 0, "terminate": 0}

    async def fault(kind: str) -> None:
        if kind == "restart":
            await asyncio.to_thread(own_pg.restart, mode="immediate")
        else:
            # A session held through the fault: it must be among those ended (a count of
            # 0 or more said nothing; the server ends it, so its next query fails).
            async with pool.connection() as held:
                await held.execute("SELECT 1")
                assert await terminate_backends(own_pg.url, dbname_of(pool)) >= 1
                with pytest.raises(psycopg.OperationalError):
                    await held.execute("SELECT 1")
        faults[kind] += 1

    transient_before = sum(STATS.failures.values())
    admitted: list[str] = []
    timeline: list[str] = []
    try:
        await migrate(pool)
        players = [await make_player(pool, PRICE * GUESSES * len(ROUNDS)) for _ in range(PLAYERS)]
        for kind in ROUNDS:
            t0 = time.monotonic()
            rid = await make_round(pool)
            done = 0
            halfway = asyncio.Event()

            async def play(pid: str, rid: str = rid,
                           halfway: asyncio.Event = halfway) -> list[Admitted | Reason]:
                nonlocal done
                outs: list[Admitted | Reason] = []
                for _ in range(GUESSES):
                    outs.append(await submit(services, rid, pid, format_guess(SECRET)))
                    done += 1
                    if done == PLAYERS * GUESSES // 3:
                        halfway.set()
                return outs

            async def fault_at_halfway(kind: str = kind, halfway: asyncio.Event = halfway) -> None:
                await halfway.wait()
                await fault(kind)

            results = await asyncio.gather(*(play(p) for p in players), fault_at_halfway())
            t1 = time.monotonic()
            outs = [o for r in results if isinstance(r, list) for o in r]
            assert all(isinstance(o, Admitted) for o in outs), outs  # nothing unavailable, nothing raised
            admitted += [o.job_id for o in outs if isinstance(o, Admitted)]
            ids = await retry(lambda rid=rid: _rows(pool, "SELECT id FROM guesses WHERE round_id = %s", rid),
                              what="guess ids", pool=pool)  # the test's own reads retry too
            for i, (gid,) in enumerate(ids):
                await record_score(pool, str(gid), (i * 97) % 601)
            settled, _ = await asyncio.gather(close_and_settle(services, rid), fault(kind))
            assert isinstance(settled, tuple) and settled, settled
            timeline.append(f"{kind} {time.monotonic() - t0:.1f}s (submission {t1 - t0:.1f}s)")
        print("\nfault timeline:", "; ".join(timeline), dict(STATS.failures))
        assert faults == {"restart": 10, "terminate": 10}  # 5 each at submission, 5 each at close
        rounds = await retry(lambda: _rows(pool, "SELECT count(*) FILTER (WHERE state <> 'settled'),"
                                                 " count(*) FROM rounds"), what="rounds", pool=pool)
        assert rounds == [(0, len(ROUNDS))]
        guesses = await retry(lambda: _rows(pool, "SELECT count(*), count(DISTINCT id) FROM guesses"),
                              what="guesses", pool=pool)
        assert guesses == [(len(admitted), len(set(admitted)))]  # each charged once
        assert len(admitted) == len(ROUNDS) * PLAYERS * GUESSES
        assert (await audit(pool)).failures == {}
        assert sum(STATS.failures.values()) > transient_before  # the faults did reach the wallet
    finally:
        await pool.close()
        await drop_database(own_pg.url, dbname_of(pool))
