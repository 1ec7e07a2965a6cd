"""The cache tier is read: the bot's current round and the scorer's secret come from Valkey,
PostgreSQL answers a miss or a Valkey failure. The reads it saves are counted (PostgreSQL
transactions and statements on ``rounds``), never timed.

Also here: ``submit(..., explain=True)`` hands back the detail of a refusal, and the close
marker ``cm:<round>:closed`` decides a re-run's path.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from psycopg_pool import AsyncConnectionPool

from codemojex.bot import CommandWorker
from codemojex.bot.inbound import Inbound, parse_command
from codemojex.domain import CLASSIC, BadGuess, parse_guess
from codemojex.domain.errors import ConfigurationError, Reason
from codemojex.service import (
    Admitted,
    Refusal,
    Services,
    close_and_settle,
    closed_key,
    current_round,
    submit,
)
from codemojex.service.cache import CURRENT, CacheTier
from codemojex.service.codec import decode_guess
from codemojex.workers import ScoreWorker
from echomq import AsyncConnector
from tests.codemojex.botkit import user_id
from tests.codemojex.game import PRICE, eventually, make_player, make_round

GUESS = "😀 😎 🤖 👻 🐱 🐶"
BOTH = pytest.mark.parametrize(
    "backend", ["single", pytest.param("cluster", marks=pytest.mark.cluster)], indirect=True)
# A read of the round outside a lock: the charge's own locking read (FOR SHARE / FOR UPDATE)
# is the check on the database clock and stays.
ROUND_READ = re.compile(r"FROM rounds\b(?![^;]*FOR (SHARE|UPDATE))", re.S)


class _Conn:
    """A pooled connection that records every statement it executes."""

    def __init__(self, conn: Any, log: list[str]) -> None:
        self._conn = conn
        self._log = log

    async def execute(self, query: Any, *args: Any, **kw: Any) -> Any:
        self._log.append(str(query))
        return await self._conn.execute(query, *args, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


class CountingPool:
    """The real pool, counting checkouts (one per wallet transaction or read) and statements."""

    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool
        self.checkouts = 0
        self.statements: list[str] = []

    @contextlib.asynccontextmanager
    async def connection(self, *args: Any, **kw: Any) -> AsyncIterator[_Conn]:
        self.checkouts += 1
        async with self._pool.connection(*args, **kw) as conn:
            yield _Conn(conn, self.statements)

    def round_reads(self) -> int:
        return sum(1 for s in self.statements if ROUND_READ.search(s))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)


@contextlib.asynccontextmanager
async def running(tier: CacheTier) -> AsyncIterator[CacheTier]:
    tree = tier.supervisor()
    task = asyncio.create_task(tree.run())
    try:
        yield tier
    finally:
        tree.stop()
        await asyncio.wait_for(task, 10)


def _services(pool: AsyncConnectionPool, conn: AsyncConnector, qname: str,
              cache: CacheTier | None) -> tuple[Services, CountingPool]:
    counting = CountingPool(pool)
    return Services(counting, conn, cache=cache, suffix=f"-{qname}"), counting  # type: ignore[arg-type]


async def _guess(worker: CommandWorker, chat: int, n: int) -> None:
    inbound = Inbound(1000 + n, chat, chat, "Ada", GUESS)
    (reply,) = await worker.run(parse_command(inbound.text), inbound, f"JOB-count-{chat}-{n}")
    assert "accepted" in reply[1], reply


async def _per_guess(services: Services, counting: CountingPool, chat: int,
                     n: int) -> tuple[int, int, int, int]:
    """(bot transactions, bot round reads, scorer transactions, scorer round reads) of one guess."""
    worker = CommandWorker(services)
    before, reads = counting.checkouts, counting.round_reads()
    await _guess(worker, chat, n)
    bot = (counting.checkouts - before, counting.round_reads() - reads)
    (lease,) = await services.scores.claim(1, lease_ms=10_000)
    before, reads = counting.checkouts, counting.round_reads()
    await ScoreWorker(services).handle(lease)
    await services.scores.complete(lease)
    return (*bot, counting.checkouts - before, counting.round_reads() - reads)


@BOTH
async def test_the_cache_tier_saves_the_round_reads_of_a_guess(
        pool: AsyncConnectionPool, conn: AsyncConnector, qname: str) -> None:
    rid = await make_round(pool)
    chat = user_id()
    tier = CacheTier(conn, suffix=f"-{qname}")
    cached, cached_pool = _services(pool, conn, qname, tier)
    bare, bare_pool = _services(pool, conn, qname, None)
    worker = CommandWorker(cached, start_coins=20 * PRICE)
    start = Inbound(999, chat, chat, "Ada", "/start")
    await worker.run(parse_command(start.text), start, f"JOB-start-{chat}")
    async with running(tier):
        rnd = await current_round(cached)  # misses (as /start's did): PostgreSQL answers, the tier is filled
        assert rnd is not None and tier.reads.misses == 2 and tier.reads.hits == 0

        async def filled() -> bool:
            return await tier.games.get(CURRENT) is not None and await tier.games.get(rnd.id) is not None

        await eventually(filled, what="the round cached")
        hits = tier.reads.hits
        with_cache = [await _per_guess(cached, cached_pool, chat, n) for n in range(3)]
        assert tier.reads.hits == hits + 6  # each guess: the bot's current round, the scorer's secret
        without = [await _per_guess(bare, bare_pool, chat, 10 + n) for n in range(3)]
    assert len(set(with_cache)) == 1 and len(set(without)) == 1  # every guess alike
    bot_tx_c, bot_reads_c, score_tx_c, score_reads_c = with_cache[0]
    bot_tx_b, bot_reads_b, score_tx_b, score_reads_b = without[0]
    # A warm cache: no read of the round at all, in the bot or the scorer.
    assert (bot_reads_c, score_reads_c) == (0, 0)
    # Without it: one read of the round in the bot (current round, one query, handed on to
    # submit, which reads it no more) and one in the scorer (the secret).
    assert (bot_reads_b, score_reads_b) == (1, 1)
    assert (bot_tx_b - bot_tx_c, score_tx_b - score_tx_c) == (1, 1)  # one transaction saved each
    print(f"\nPostgreSQL per guess: bot {bot_tx_c} transactions with the cache, {bot_tx_b} without;"
          f" scorer {score_tx_c} with, {score_tx_b} without; round reads 0 with, 2 without")
    assert rid  # the round the guesses went to exists in PostgreSQL


async def test_a_valkey_failure_falls_back_to_postgresql(pool: AsyncConnectionPool, qname: str) -> None:
    rid = await make_round(pool)
    dead = AsyncConnector.from_url("redis://127.0.0.1:9", retry_budget_s=0.2, socket_timeout=0.2)
    try:
        tier = CacheTier(dead, suffix=f"-{qname}")
        rnd = await tier.round(pool, rid)
        assert rnd is not None and rnd.id == rid and len(rnd.secret) == 6
        assert await tier.current_round(pool) is not None
        assert (tier.reads.hits, tier.reads.misses) == (0, 2)
        assert await tier.round(pool, "RNDnope") is None
    finally:
        await dead.aclose()


async def test_a_malformed_entry_is_a_miss(pool: AsyncConnectionPool, conn: AsyncConnector,
                                           qname: str) -> None:
    rid = await make_round(pool)
    tier = CacheTier(conn, suffix=f"-{qname}")
    await tier.games.write(rid, {"id": rid, "state": "open"})  # no secret, no times
    rnd = await tier.round(pool, rid)
    assert rnd is not None and rnd.secret and tier.reads.misses == 1


async def test_submit_explains_a_refusal(services: Services) -> None:
    rid = await make_round(services.pool)
    player = await make_player(services.pool, PRICE)
    text = "😀 😎 🤖"
    out = await submit(services, rid, player, text, explain=True)
    expected = parse_guess(text, CLASSIC)
    assert isinstance(expected, BadGuess)
    assert out == Refusal(Reason.BAD_GUESS, expected.detail)
    assert await submit(services, rid, player, text) is Reason.BAD_GUESS  # the closed set, as before
    none = await submit(services, "RNDnope", player, GUESS, explain=True)
    assert isinstance(none, Refusal) and none.reason is Reason.NO_ROUND


async def test_submit_reads_no_round_it_was_handed(pool: AsyncConnectionPool, conn: AsyncConnector,
                                                   qname: str) -> None:
    services, counting = _services(pool, conn, qname, None)
    rid = await make_round(pool)
    player = await make_player(pool, 2 * PRICE)
    rnd = await current_round(services)
    assert rnd is not None and rnd.id == rid
    reads = counting.round_reads()
    out = await submit(services, rid, player, GUESS, rnd=rnd)
    assert isinstance(out, Admitted) and counting.round_reads() == reads
    out = await submit(services, rid, player, GUESS)  # not handed: read once
    assert isinstance(out, Admitted) and counting.round_reads() == reads + 1
    job = decode_guess((await services.scores.browse("pending", limit=10))[0].row["payload"])
    assert job.round_id == rid
    with pytest.raises(ConfigurationError):  # the round handed must be the round named
        await submit(services, "RNDother", player, GUESS, rnd=rnd)


@BOTH
async def test_the_close_marker_decides_a_re_runs_path(pool: AsyncConnectionPool, conn: AsyncConnector,
                                                       qname: str) -> None:
    services, counting = _services(pool, conn, qname, None)
    rid = await make_round(pool)
    first = await close_and_settle(services, rid)
    assert first == ()  # no guesses: settled with no payouts
    assert await conn.command("GET", closed_key(rid)) == b"settled"
    before = counting.checkouts
    assert await close_and_settle(services, rid) == ()
    shortcut = counting.checkouts - before  # the marker says settled: no close transaction
    await conn.command("SET", closed_key(rid), "CLS-lost", "KEEPTTL")  # as if the value were lost
    before = counting.checkouts
    assert await close_and_settle(services, rid) == ()
    assert counting.checkouts - before == shortcut + 1  # the close transaction runs again
    assert await conn.command("GET", closed_key(rid)) == b"settled"
