"""The secret is checked (issue 25, item 5): a round's row keeps a hash of its secret,
computed by PostgreSQL; the scorer refuses a cached secret that does not match it and
scores with PostgreSQL's secret instead. Tested by corrupting the cache."""

from __future__ import annotations

import psycopg
from psycopg_pool import AsyncConnectionPool

from codemojex.domain import score, secret_hash
from codemojex.service import Admitted, Services, submit
from codemojex.service.cache import CacheTier
from codemojex.wallet import get_round
from codemojex.workers import ScoreWorker
from echomq import Ack, AsyncConnector
from tests.codemojex.game import PRICE, SECRET, make_player, make_round, score_of

WRONG = tuple(reversed(SECRET))


async def test_postgresql_computes_the_hash_and_no_writer_can_store_another(
        pool: AsyncConnectionPool) -> None:
    rid = await make_round(pool)
    rnd = await get_round(pool, rid)
    assert rnd is not None and rnd.secret_hash == secret_hash(SECRET) != secret_hash(WRONG)
    async with await psycopg.AsyncConnection.connect(pool.conninfo, autocommit=True) as conn:
        await conn.execute("UPDATE rounds SET secret_hash = 'forged' WHERE id = %s", (rid,))
        cur = await conn.execute("SELECT secret_hash FROM rounds WHERE id = %s", (rid,))
        assert await cur.fetchone() == (secret_hash(SECRET),)  # the trigger wrote it back


async def _corrupt(pool: AsyncConnectionPool, tier: CacheTier, rid: str) -> None:
    """Rewrite the round's cache entry whole, with another secret."""
    rnd = await get_round(pool, rid)
    assert rnd is not None
    fields = {"id": rid, "emoji_set": rnd.emoji_set, "opens_at": rnd.opens_at.isoformat(),
              "closes_at": rnd.closes_at.isoformat(), "state": rnd.state, "price": str(rnd.guess_price),
              "pot": str(rnd.pot), "secret": " ".join(WRONG)}
    assert await tier.games.write(rid, fields)


async def test_a_corrupted_cached_secret_is_refused_and_postgresql_scores(
        pool: AsyncConnectionPool, conn: AsyncConnector, qname: str) -> None:
    rid = await make_round(pool)
    player = await make_player(pool, 2 * PRICE)
    for fresh_process in (False, True):  # the hash known in memory already, then read cold
        tier = CacheTier(conn, suffix=f"-{qname}")
        services = Services(pool, conn, cache=tier, suffix=f"-{qname}")
        if not fresh_process:
            assert await tier.round(pool, rid) is not None  # a miss: PostgreSQL's row, hash trusted
        await _corrupt(pool, tier, rid)
        cached = await tier.round(pool, rid)
        assert cached is not None and cached.secret == WRONG  # the cache now lies
        out = await submit(services, rid, player, list(SECRET))
        assert isinstance(out, Admitted)
        (lease,) = await services.scores.claim(1, lease_ms=10_000)
        assert isinstance(await ScoreWorker(services).handle(lease), Ack)
        await services.scores.complete(lease)
        assert tier.refused == 1
        # Scored with PostgreSQL's secret (600), not the cached one.
        assert await score_of(pool, out.job_id) == score(SECRET, SECRET).total == 600
        assert score(WRONG, SECRET).total != 600


async def test_a_true_cached_secret_costs_no_read_of_postgresql_once_its_hash_is_known(
        pool: AsyncConnectionPool, conn: AsyncConnector, qname: str) -> None:
    rid = await make_round(pool)
    tier = CacheTier(conn, suffix=f"-{qname}")
    first = await tier.round(pool, rid)  # a miss, the hash remembered
    assert first is not None
    await tier.games.write(rid, {"id": rid, "emoji_set": first.emoji_set,
                                 "opens_at": first.opens_at.isoformat(),
                                 "closes_at": first.closes_at.isoformat(), "state": first.state,
                                 "price": str(first.guess_price), "pot": "0", "secret": " ".join(SECRET)})
    misses = tier.reads.misses
    again = await tier.verified_round(pool, rid)
    assert again is not None and again.secret == SECRET and tier.refused == 0
    assert tier.reads.misses == misses  # answered by Valkey, checked against the remembered hash
