"""Priorities hold against every kind of job, whatever the queue's history (issue 29 item 2).

The rule (docs/protocol.md "Priorities", lua/include/pend.lua): a waiting job's score is
its start tag on the queue's virtual time minus ``p * AGE``; a plain job's tag is the
virtual time itself. Before, plain jobs scored 0 while tags grew with history, so once
the lanes' virtual time passed ``1000 * p`` a plain level-0 job overtook a level-p one.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import hypothesis.strategies as st
import pytest
import redis
from hypothesis import HealthCheck, given, settings

from echomq import AsyncQueue, RetryOutcome, Verdict, generate
from echomq.protocol.gate import PRIORITY_AGE

LONG = 600_000
HISTORY = 3_500  # laned jobs through the queue first: vtime passes 3 * AGE


def jid() -> str:
    return generate("JOB")


async def history(q: AsyncQueue, n: int = HISTORY) -> None:
    """``n`` laned jobs admitted, claimed and completed: the lanes' virtual time passes n."""
    assert set(await q.admit_many([(jid(), b"", "hist") for _ in range(n)])) == {Verdict.ENQUEUED}
    while True:
        got = await q.claim(1000, lease_ms=LONG, window=1000)
        if not got:
            break
        await q.complete_many(list(got))


async def test_a_plain_job_does_not_overtake_a_higher_level_after_history(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    """The issue's reproduction: 3,500 laned jobs of history, then a plain level-0 job and
    level-3 jobs (without a lane, and on a lane): the level-3 jobs are claimed first."""
    await history(queue)
    assert float(raw.hget(queue.keys["meta"], "vtime") or 0) > 3 * PRIORITY_AGE
    plain, high, laned = jid(), jid(), jid()
    assert await queue.enqueue(plain, b"") is Verdict.ENQUEUED
    assert await queue.admit(high, b"", priority=3) is Verdict.ENQUEUED
    assert await queue.admit(laned, b"", lane="x", priority=3) is Verdict.ENQUEUED
    got = [x.id for x in await queue.claim(3, lease_ms=LONG)]
    assert set(got[:2]) == {high, laned} and got[2] == plain


async def test_plain_jobs_stay_fifo_and_ahead_of_later_laned_jobs_of_their_level(
        queue: AsyncQueue) -> None:
    await history(queue, 50)
    first = [jid() for _ in range(3)]
    for i in first:
        await queue.enqueue(i, b"")
    laned = jid()
    await queue.admit(laned, b"", lane="y")
    more = [jid() for _ in range(2)]
    await queue.enqueue_many([(i, b"") for i in more])
    got = [x.id for x in await queue.claim(6, lease_ms=LONG)]
    assert got == [*first, *more, laned]


# ------------------------------------------------------------------ the property
KINDS = ("plain", "laned", "unlaned", "delayed", "handed off")


@dataclass
class Run:
    """What the test admitted and what the server answered, to check the rule from the
    claims the server made: at each claim, no waiting job had a higher level than a
    claimed one (the aging bound: runs stay far below AGE jobs per lane, so it is never
    reached, and every inversion is a failure)."""

    waiting: dict[str, int] = field(default_factory=dict)  # id -> level, pending now
    delayed: dict[str, int] = field(default_factory=dict)
    claimed: list[tuple[str, int]] = field(default_factory=list)
    seen: Counter[str] = field(default_factory=Counter)


_QUEUES: dict[str, str] = {}
_BUILT: set[str] = set()
STEP = st.tuples(st.sampled_from(("admit", "admit", "admit", "claim", "retry", "promote")),
                 st.sampled_from(KINDS), st.integers(0, 3), st.integers(1, 4),
                 st.sampled_from([None, "a", "b", "c"]))


@pytest.mark.timeout(300)
@settings(max_examples=12, deadline=None, derandomize=False,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(steps=st.lists(STEP, min_size=60, max_size=200))
def test_a_higher_level_is_claimed_first_whatever_the_kind_and_the_history(
        backend_url: str, backend: str, steps: list[tuple[str, str, int, int, str | None]]) -> None:
    asyncio.run(_property(backend_url, backend, steps))


async def _property(url: str, backend: str, steps: list[tuple[str, str, int, int, str | None]]) -> None:
    from echomq import AsyncClusterConnector, AsyncConnector
    conn = (AsyncClusterConnector if backend == "cluster" else AsyncConnector).from_url(url)
    # One queue per backend for every example: its history is built once (3,500 laned
    # jobs) and grows with each example, which drains what it admitted.
    name = _QUEUES.setdefault(backend, f"prio-{generate('JOB')[-8:]}")
    q = AsyncQueue(conn, name)
    try:
        if backend not in _BUILT:
            await history(q)
            _BUILT.add(backend)
        await _drain(q)  # what an earlier (failed) example left
        run = Run()
        leases = []
        for verb, kind, level, n, lane in steps:
            if verb == "admit":
                await _admit(q, run, kind, level, lane)
            elif verb == "claim":
                got = list(await q.claim(n, lease_ms=LONG))
                _check(run, [x.id for x in got])
                leases += got
            elif verb == "retry" and leases:
                lease = leases.pop(0)
                if await q.retry(lease, delay_ms=0, error="again") is RetryOutcome.SCHEDULED:
                    run.waiting[lease.id] = dict(run.claimed)[lease.id]
                    run.seen["retried"] += 1
            elif verb == "promote" and run.delayed:
                await _promote(q, run)
            if leases and len(leases) > 20:
                await q.complete_many(leases)
                leases = []
        await _promote(q, run)
        while run.waiting:
            got = list(await q.claim(5, lease_ms=LONG))
            assert got, f"{len(run.waiting)} jobs left unclaimable"
            _check(run, [x.id for x in got])
            await q.complete_many(got)
        assert sum(run.seen.values()) > 0
        RUNS.update(run.seen)
        RUNS["examples"] += 1
    finally:
        await conn.aclose()


RUNS: Counter[str] = Counter()
"""What the property's examples did, summed over a session (``pytest -s`` prints it)."""


@pytest.fixture(scope="module", autouse=True)
def _report_runs() -> Iterator[None]:
    yield
    if RUNS:
        print(f"\npriority property: {dict(sorted(RUNS.items()))}")


async def _drain(q: AsyncQueue) -> None:
    delayed = [v.id for v in await q.browse("delayed", limit=1000)]
    if delayed:
        await q.cancel(delayed)
    while got := list(await q.claim(1000, lease_ms=LONG, window=1000)):
        await q.complete_many(got)


async def _admit(q: AsyncQueue, run: Run, kind: str, level: int, lane: str | None) -> None:
    i = jid()
    if kind == "plain":
        await q.enqueue(i, b"")
        level = 0
        row = await q.job(i)
        if row is not None and row["state"] == b"active":  # a registration left parked
            run.claimed.append((i, 0))
            return
    elif kind == "laned":
        await q.admit(i, b"", lane=lane or "a", priority=level)
    elif kind == "unlaned":
        await q.admit(i, b"", priority=level)
    elif kind == "delayed":
        await q.admit(i, b"", lane=lane, priority=level, delay_ms=1)
        run.delayed[i] = level
        run.seen["delayed"] += 1
        return
    else:  # handed off: only when nothing waits (a parked consumer sees pending empty)
        if run.waiting or not await q.park(f"t{i}", lease_ms=LONG, ttl_ms=60_000):
            return
        await q.enqueue(i, b"")  # hand-off is admission's (enqueue, enqueue_many): level 0
        level = 0
        row = await q.job(i)
        assert row is not None and row["state"] == b"active"  # leased in the admission
        run.claimed.append((i, level))
        run.seen["handed off"] += 1
        return
    run.waiting[i] = level
    run.seen[f"{kind} level {level}"] += 1


async def _promote(q: AsyncQueue, run: Run) -> None:
    """Every delayed job due (1 ms) and promoted: polled on the server's own answer."""
    for _ in range(1000):
        if not run.delayed:
            return
        await q.promote()
        for i in list(run.delayed):
            row = await q.job(i)
            if row is not None and row["state"] == b"pending":
                run.waiting[i] = run.delayed.pop(i)
        await asyncio.sleep(0.002)
    raise AssertionError(f"{len(run.delayed)} delayed jobs never came due")


def _check(run: Run, got: list[str]) -> None:
    """The claims of one call, in the server's order: each claimed job's level is at
    least every job's still waiting (levels never rise within a call)."""
    for i in got:
        # A delayed job may be promoted by the claim itself (a claim promotes what is due).
        level = run.waiting.pop(i) if i in run.waiting else run.delayed.pop(i)
        higher = {j: lv for j, lv in run.waiting.items() if lv > level}
        assert not higher, f"level {level} claimed while {len(higher)} of a higher level waited"
        run.claimed.append((i, level))
        run.seen["claims checked"] += 1
