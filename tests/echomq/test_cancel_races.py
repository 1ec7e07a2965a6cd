"""Cancel racing complete and claim (docs/decisions/0023), on both topologies: two calls
in flight at once on two connections, many rounds, exactly one outcome each round.

asyncio only (two calls in flight need ``asyncio.gather``); the rest of cancellation
and progress runs on both APIs: tests/echomq/_async/test_cancel.py and its generated
blocking copy.
"""

from __future__ import annotations

import asyncio
from typing import Any

import redis

from echomq import AsyncQueue, CancelOutcome, Completion, generate
from tests.echomq.invariants import assert_consistent


async def _leased(q: AsyncQueue, lane: str | None = None, serial: bool = False) -> Any:
    jid = generate("JOB")
    await q.admit(jid, b"p", lane=lane, serial=serial)
    leases = await q.claim(1, lease_ms=60_000, window=1)
    assert [x.id for x in leases] == [jid]
    return leases[0]


async def test_cancel_racing_complete_has_exactly_one_outcome_every_round(
        queue: AsyncQueue, raw: redis.Redis, backend_url: str) -> None:
    """Two connections, cancel and complete sent together, 150 rounds: either the
    completion won (done, cancel LEFT) or the cancel did (asked, the completion CANCELLED)."""
    other = type(queue.connector).from_url(backend_url)
    canceller = AsyncQueue(other, queue.name)
    seen: dict[str, int] = {"done": 0, "cancelled": 0}
    try:
        for i in range(150):
            lease = await _leased(queue)
            if i % 2:
                asked, done = await asyncio.gather(canceller.cancel([lease.id]), queue.complete(lease, b"r"))
            else:
                done, asked = await asyncio.gather(queue.complete(lease, b"r"), canceller.cancel([lease.id]))
            state = (await queue.job(lease.id) or {})["state"].decode()
            if done is Completion.COMPLETED:
                assert asked == [CancelOutcome.LEFT] and state == "done", i
            else:
                assert done is Completion.CANCELLED and asked == [CancelOutcome.ASKED], i
                assert state == "cancelled", i
            seen[state] += 1
    finally:
        await other.aclose()
    assert sum(seen.values()) == 150
    where = assert_consistent(raw, queue.name)
    assert len(where) == 150 and set(where.values()) == {"done"}
    print(f"cancel vs complete, 150 rounds: {seen}")


async def test_cancel_racing_claim_either_cancels_the_waiting_job_or_asks_the_running_one(
        queue: AsyncQueue, raw: redis.Redis, backend_url: str) -> None:
    other = type(queue.connector).from_url(backend_url)
    canceller = AsyncQueue(other, queue.name)
    try:
        for _ in range(60):
            jid = generate("JOB")
            await queue.enqueue(jid, b"p")
            asked, leases = await asyncio.gather(canceller.cancel([jid]),
                                                 queue.claim(1, lease_ms=60_000, window=1))
            if leases:  # the claim won: the running attempt was asked to stop
                assert asked == [CancelOutcome.ASKED]
                assert await queue.complete(leases[0]) is Completion.CANCELLED
            else:
                assert asked == [CancelOutcome.CANCELLED]
            assert (await queue.job(jid) or {})["state"] == b"cancelled"
    finally:
        await other.aclose()
    assert set(assert_consistent(raw, queue.name).values()) == {"done"}
