"""The cache tier (seed 003): best effort, whole values, ``rest_for_one`` supervision, on a
single server and on the local 3+3 cluster.

* A Valkey error never fails the writer: ``put`` returns at once and never raises, the
  table task survives failed writes, and opening a round with a dead cache still opens it.
* A reader never sees a half-built value: writers replace a many-field value over and
  over (shadow key, one RENAME) while readers read it; every read is one whole value.
* ``rest_for_one``: a directory crash restarts the tables after it, in order, and they
  register with the new directory; a table crash restarts it and the tables after it,
  never the directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from codemojex.domain import CLASSIC
from codemojex.service import Services, open_round
from codemojex.service.cache import DIRECTORY_KEY, SHADOW, CacheTier
from codemojex.service.codec import OpenRound
from codemojex.wallet import Round, get_round
from echomq import AsyncClusterConnector, AsyncConnector
from echomq.core import ids
from tests.codemojex.game import eventually

BOTH = pytest.mark.parametrize(
    "backend", ["single", pytest.param("cluster", marks=pytest.mark.cluster)], indirect=True)

AnyConnector = AsyncConnector | AsyncClusterConnector


def _round(rid: str, state: str = "open") -> Round:
    now = datetime.now(UTC)
    return Round(rid, CLASSIC.id, ("😀",) * 6, now, now + timedelta(minutes=1), state, 10, 0)


async def test_a_valkey_error_never_fails_the_writer(services: Services) -> None:
    dead = AsyncConnector.from_url("redis://127.0.0.1:9", retry_budget_s=0.2, socket_timeout=0.2)
    tier = CacheTier(dead)
    tree = tier.supervisor()
    task = asyncio.create_task(tree.run())
    try:
        for i in range(10):
            tier.put_round(_round(f"RND{i}"))  # returns at once, raises nothing
        tier.games.put("bad{key}", {"a": 1})  # a bad key is dropped, not raised
        tier.games.put("k", {})  # so is an empty value
        assert tier.games.dropped == 2

        async def all_tried() -> bool:
            return tier.games.dropped == 12

        await eventually(all_tried, what="every write tried and dropped")
        assert tier.games.written == 0 and tier.games.running  # the table task lives on
        assert await tier.games.get("RND1") is None  # a reader gets None, not an error
        # The writer of a game: a round opens with its cache unreachable.
        services.cache = tier
        rid = ids.generate("RND")
        rnd = await open_round(services, OpenRound(ids.generate("SER"), rid, 0, 1, 60_000, 0, 10, "classic"))
        assert rnd.id == rid and (await get_round(services.pool, rid)) is not None
    finally:
        tree.stop()
        await task
        await dead.aclose()


@BOTH
async def test_a_reader_never_sees_a_half_built_value(conn: AnyConnector, qname: str) -> None:
    tier = CacheTier(conn)
    table = tier.games
    key = f"race-{qname}"
    fields = 40
    torn: list[dict[str, str]] = []
    reads = writes = 0
    stop = asyncio.Event()

    async def writer(w: int) -> None:
        nonlocal writes
        n = 0
        while not stop.is_set():
            n += 1
            tag = f"{w}:{n}"
            # Each value names its writer and number in every field, and has its own size.
            value = {f"f{i}": tag for i in range(random.randint(fields // 2, fields))} | {"n": tag}
            assert await table.write(key, value)
            writes += 1

    async def reader() -> None:
        nonlocal reads
        while not stop.is_set():
            value = await table.get(key)
            reads += 1
            if value is None:
                continue
            tag = value["n"]
            size = len(value) - 1
            if any(value.get(f"f{i}") != tag for i in range(size)) or size < fields // 2:
                torn.append(value)

    tasks = [asyncio.create_task(writer(w)) for w in range(3)] + [
        asyncio.create_task(reader()) for _ in range(3)]
    await asyncio.sleep(0)  # let them start

    async def enough() -> bool:
        return reads >= 600 and writes >= 200

    try:
        await eventually(enough, timeout_s=60, what="reads and writes racing")
    finally:
        stop.set()
        await asyncio.gather(*tasks)
    assert torn == []
    # Every shadow was swapped in: none is left behind.
    assert await conn.command("KEYS", f"{table.key(key)}:shadow:*") == []
    # A writer that dies between building the shadow and the swap leaks nothing for long.
    orphan = f"{table.key(key)}:shadow:dead"
    await conn.eval(SHADOW, [orphan], [table.ttl_s * 1000, "a", "1"])
    assert 0 < int(await conn.command("PTTL", orphan)) <= table.ttl_s * 1000
    await conn.command("DEL", orphan, table.key(key))  # one hash tag: one slot


def _crashable(run: Callable[[], Awaitable[None]], name: str, log: list[str],
               boom: asyncio.Event) -> Callable[[], Awaitable[None]]:
    """``run`` that records its starts and stops, and dies when ``boom`` is set."""

    async def wrapped() -> None:
        log.append(f"start {name}")
        inner = asyncio.create_task(run())
        trigger = asyncio.create_task(boom.wait())
        try:
            await asyncio.wait({inner, trigger}, return_when=asyncio.FIRST_COMPLETED)
            if boom.is_set():
                boom.clear()
                raise RuntimeError(f"{name} crashed")
            await inner
        finally:
            log.append(f"stop {name}")
            for t in (inner, trigger):
                t.cancel()
                with contextlib.suppress(asyncio.CancelledError, RuntimeError):
                    await t

    return wrapped


@BOTH
async def test_rest_for_one_restarts_what_comes_after_the_crash_in_order(conn: AnyConnector) -> None:
    tier = CacheTier(conn)
    log: list[str] = []
    booms = {name: asyncio.Event() for name in ("directory", "games", "emoji_sets")}
    parts: list[Any] = [tier.directory, tier.games, tier.emoji_sets]
    for part, name in zip(parts, booms, strict=True):
        part.run = _crashable(part.run, name, log, booms[name])
    tree = tier.supervisor()
    task = asyncio.create_task(tree.run())

    async def registered(generation: int) -> bool:
        d = tier.directory
        if d.generation != generation or d.tables != {"games": generation, "emoji_sets": generation}:
            return False
        stored = await conn.command("HGETALL", DIRECTORY_KEY)
        return {k.decode(): int(v) for k, v in stored.items()} == d.tables

    try:
        await eventually(lambda: registered(1), what="the first start")
        assert log == ["start directory", "start games", "start emoji_sets"]
        log.clear()
        booms["directory"].set()  # the directory dies: everything after it restarts
        await eventually(lambda: registered(2), what="the tables to register with the new directory")
        assert log == ["stop directory", "stop emoji_sets", "stop games",
                       "start directory", "start games", "start emoji_sets"]
        log.clear()
        booms["games"].set()  # a table dies: it and the tables after it restart, not the directory
        await eventually(lambda: asyncio.sleep(0, len(log) == 4), what="the games restart")
        assert log == ["stop games", "stop emoji_sets", "start games", "start emoji_sets"]
        await eventually(lambda: registered(2), what="the tables registered again")
        tier.put_round(_round("RNDREST"))
        await eventually(lambda: _has(tier, "RNDREST"), what="a write after the restarts")
    finally:
        tree.stop()
        await task
        await conn.command("DEL", DIRECTORY_KEY)
        await conn.command("DEL", tier.games.key("RNDREST"))


async def _has(tier: CacheTier, rid: str) -> bool:
    return await tier.games.get(rid) is not None
