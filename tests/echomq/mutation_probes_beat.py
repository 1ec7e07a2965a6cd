"""Targeted probes of ``heartbeat_batch`` (a consumer's beat in one call, decision 0055):
every kind of lease in one call, each answered as ``heartbeat`` answers it alone, and the
batch bound. Part of ``PROBES`` (tests/echomq/mutation_probes.py), same contract:
``async def probe(conn, name)``, AssertionError when the server does not keep the guarantee.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from echomq import AsyncQueue, InvalidArgument, generate
from echomq.core.bounds import MAX_BEATS
from echomq.core.model import Completion
from echomq.protocol import Call, decode_reap, reap
from echomq.protocol.scripts import load


async def _past(conn: Any, deadline_ms: int) -> None:
    give_up = time.monotonic() + 10
    while await conn.server_time_ms() <= deadline_ms:
        assert time.monotonic() < give_up, "the server's clock never passed the deadline"


async def heartbeat_batch_answers_as_heartbeat(conn: Any, name: str) -> None:
    """One beat of a live lease, an expired one (not reaped), an older attempt of a job
    claimed again, a finished one and one asked to stop: extended, lost, lost, lost,
    extended with the stop's sign; the lost ones' deadlines do not move."""
    q = AsyncQueue(conn, name)
    for _ in range(5):
        await q.enqueue(generate("JOB"), b"x")
    expired, old = await q.claim(2, lease_ms=1)
    await _past(conn, max(expired.deadline_ms, old.deadline_ms))
    assert tuple(decode_reap(await conn.run(reap(q.k, [old.id], max_attempts=5)))) == (1, 0)
    fresh = {x.id: x for x in await q.claim(4, lease_ms=60_000)}
    new = fresh.pop(old.id)
    live, asked, done = fresh.values()
    await q.cancel([asked.id])
    assert await q.complete(done) is Completion.COMPLETED
    active = q.keys["active"]
    kept = {x.id: await conn.command("ZSCORE", active, x.id) for x in (expired, new)}
    got = await q.heartbeat_many([live, expired, old, done, asked], lease_ms=120_000)
    told = [None if d is None else d.cancel for d in got]
    assert told == [False, None, None, None, True], told
    for lease in (expired, new):  # the lost leases' jobs: their deadlines unchanged
        assert await conn.command("ZSCORE", active, lease.id) == kept[lease.id], lease.id


async def heartbeat_batch_is_bounded(conn: Any, name: str) -> None:
    """A heartbeat_batch call of MAX_BEATS + 1 leases is refused whole (EMQARG), nothing
    extended; MAX_BEATS leases go in one call."""
    q = AsyncQueue(conn, name)
    n = MAX_BEATS + 1
    await q.enqueue_many([(generate("JOB"), b"x") for _ in range(n)])
    leases = await q.claim(n, lease_ms=60_000)
    assert len(leases) == n

    def call(some: list[Any]) -> Call:
        args: list[Any] = [600_000]
        for x in some:
            args += [x.id, x.attempt]
        return Call(load("heartbeat_batch"), [q.k.active, q.k.meta, *(q.k.job(x.id) for x in some)], args)
    refused = ""
    try:
        await conn.run(call(leases))
    except InvalidArgument as exc:
        refused = str(exc)
    assert "EMQARG" in refused, f"a call of {n} leases was accepted"
    claimed = max(x.deadline_ms for x in leases)
    later = await conn.command("ZRANGEBYSCORE", q.keys["active"], f"({claimed}", "+inf")
    assert later == [], later  # refused whole: no lease extended
    assert all(d != 0 for d in await conn.run(call(leases[:MAX_BEATS])))


BEAT_PROBES: dict[str, Callable[[Any, str], Awaitable[None]]] = {p.__name__: p for p in (
    heartbeat_batch_answers_as_heartbeat, heartbeat_batch_is_bounded)}
