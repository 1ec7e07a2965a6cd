"""Concurrent upkeep: several reapers and promoters with consumers on one queue.

Reaping and promotion are server-side transitions that any number of processes may
run at once (docs/decisions/0002-peek-then-act.md): each re-checks every candidate on
the server, so two reapers that peeked the same expired lease requeue it once, and a
job a consumer claimed in between is left alone. A long backlog is worked off in
script calls whose size the client bounds (``QueueOptions.reap_batch``).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter

import pytest
import redis

from echomq import AsyncConnector, AsyncQueue, Lease, Verdict, generate
from echomq.protocol.scripts import load
from echomq.runtime.consumer import Consumer, ConsumerOptions
from echomq.servers.server import EmbeddedValkey
from tests.echomq.invariants import assert_consistent


async def _wait(check, limit_s: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + limit_s
    while not await check():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


async def _expire_all(q: AsyncQueue, raw: redis.Redis, n: int) -> None:
    """Claim every pending job with a 1 ms lease and wait until the server's clock passed them."""
    claimed = 0
    while claimed < n:
        claimed += len(await q.claim(500, lease_ms=1, window=500))

    async def expired() -> bool:
        secs, micros = raw.time()
        now_ms = secs * 1000 + micros // 1000
        return raw.zcount(q.keys["active"], "-inf", now_ms) == n

    await _wait(expired)


@pytest.mark.slow
async def test_three_reapers_and_four_consumers_requeue_each_expired_lease_once(
        valkey_url: str, qname: str) -> None:
    raw = redis.Redis.from_url(valkey_url)
    conns = [AsyncConnector.from_url(valkey_url) for _ in range(8)]
    try:
        q = AsyncQueue(conns[0], qname)
        n_expired, n_delayed = 3000, 600
        assert (await q.enqueue_many([(generate("JOB"), b"") for _ in range(n_expired)])).count(
            Verdict.ENQUEUED) == n_expired
        await _expire_all(q, raw, n_expired)
        # Delayed jobs the promoters race for while the reapers requeue.
        delayed = await asyncio.gather(*(q.admit(generate("JOB"), b"", delay_ms=300)
                                         for _ in range(n_delayed)))
        assert delayed.count(Verdict.ENQUEUED) == n_delayed

        runs: Counter[tuple[str, int]] = Counter()

        async def handler(lease: Lease) -> None:
            runs[(lease.id, lease.attempt)] += 1
            await asyncio.sleep(0.001)

        # Consumers without their own maintenance: every requeue and promotion below is
        # counted by one of the three upkeep loops.
        consumers = [Consumer(AsyncQueue(c, qname), handler, options=ConsumerOptions(
            beat_ms=50, lease_ms=30_000, concurrency=16, maintenance=False)) for c in conns[1:5]]
        stop = asyncio.Event()
        requeued, promoted, dead = [0, 0, 0], [0, 0, 0], [0, 0, 0]

        async def upkeep(i: int) -> None:
            uq = AsyncQueue(conns[5 + i], qname)
            while not stop.is_set():
                r, d = await uq.reap()
                p = await uq.promote()
                requeued[i] += r
                dead[i] += d
                promoted[i] += p
                await asyncio.sleep(0.001 if r or p else 0.01)

        tasks = [asyncio.create_task(c.run()) for c in consumers]
        tasks += [asyncio.create_task(upkeep(i)) for i in range(3)]

        async def drained() -> bool:
            return (await q.stats()).done == n_expired + n_delayed

        await _wait(drained, 120)
        stop.set()
        for c in consumers:
            c.stop()
        await asyncio.gather(*tasks)

        assert sum(requeued) == n_expired, requeued  # each expired lease requeued exactly once
        assert sum(promoted) == n_delayed, promoted
        assert sum(dead) == 0
        assert set(runs.values()) == {1}  # no attempt ran twice
        where = assert_consistent(raw, qname)
        assert set(where.values()) == {"done"}
        pipe = raw.pipeline(transaction=False)
        for jid in where:
            pipe.hmget(q.job_key(jid), "attempts", "failures")
        rows = {jid: (int(a), int(f or 0)) for jid, (a, f) in zip(where, pipe.execute(), strict=True)}
        assert Counter(rows.values()) == Counter({(2, 1): n_expired, (1, 0): n_delayed})
    finally:
        for c in conns:
            await c.aclose()
        raw.close()


_LOG_MAX = 1_000_000  # slow-log entries kept: every call of the test below, and the scripts' own
_MORE = re.compile(rb"\.\.\. \((\d+) more arguments\)$")


def _argc(command: bytes) -> int:
    """How many arguments a SLOWLOG entry's command had (the server keeps the first 31)."""
    more = _MORE.search(command)
    shown = command[: more.start()].split() if more else command.split()
    return len(shown) + (int(more.group(1)) if more else 0)


@pytest.mark.slow
async def test_a_backlog_of_expired_leases_is_reaped_in_bounded_calls(
        own_server: EmbeddedValkey, qname: str) -> None:
    """Three reapers work off 20,000 expired leases; the server's own log of every call
    shows no reap call carried more than ``reap_batch`` candidates. The log keeps the
    commands scripts run too (about 180,000 entries here), so it is long enough for all of
    them and checked not full: a 100,000-entry log pushed the oldest reap calls out (198 of
    200 seen, CI 2026-12-04). A server of its own: the log is the whole server's."""
    valkey_url = own_server.url
    raw = redis.Redis.from_url(valkey_url)
    conns = [AsyncConnector.from_url(valkey_url) for _ in range(3)]
    reap = load("reap")
    try:
        q = AsyncQueue(conns[0], qname)
        n = 20_000
        assert (await q.enqueue_many([(generate("JOB"), b"") for _ in range(n)])).count(
            Verdict.ENQUEUED) == n
        await _expire_all(q, raw, n)
        old = raw.config_get("slowlog-*")
        raw.config_set("slowlog-log-slower-than", 0)  # log every command with its arguments
        raw.config_set("slowlog-max-len", _LOG_MAX)
        raw.slowlog_reset()
        try:
            async def reaper(conn: AsyncConnector) -> int:
                rq, total = AsyncQueue(conn, qname), 0
                while True:
                    r, d = await rq.reap()
                    if not r and not d and not await conn.command("ZCARD", rq.keys["active"]):
                        return total
                    total += r + d
            totals = await asyncio.gather(*(reaper(c) for c in conns))
            log = raw.slowlog_get(_LOG_MAX)
        finally:
            raw.config_set("slowlog-log-slower-than", old["slowlog-log-slower-than"])
            raw.config_set("slowlog-max-len", old["slowlog-max-len"])
        assert sum(totals) == n
        assert len(log) < _LOG_MAX  # the log kept every call (none pushed out)
        calls = [e for e in log if e["command"].startswith(b"EVALSHA " + reap.sha.encode())]
        batch = q.options.reap_batch
        fixed = len(reap.keys) - reap.variadic_keys + len(reap.argv) - reap.variadic_argv
        bound = 3 + fixed + 2 * batch  # EVALSHA sha numkeys, fixed keys/args, a key + an id each
        sizes = [_argc(e["command"]) for e in calls]
        assert len(calls) >= n // batch
        assert max(sizes) <= bound, (max(sizes), bound)
        # Work per call, as the server measured it: print for docs/reliability.md.
        durations = sorted(e["duration"] for e in calls)
        print(f"reap calls {len(calls)}, args max {max(sizes)} (bound {bound}), "
              f"server us p50 {durations[len(durations) // 2]} max {durations[-1]}")
        assert (await q.stats()).pending == n
    finally:
        for c in conns:
            await c.aclose()
        raw.close()
