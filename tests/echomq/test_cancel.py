"""Cancellation and progress (issue 14 items 6 and 7; docs/decisions/0023), on both topologies.

* A pending or delayed job is cancelled in one step: off its set, its serial lane freed,
  a ``cancelled`` row kept in the done set (the id still refuses duplicates).
* A running job is asked to stop: its heartbeat (and progress report) says so, and
  whichever script ends the attempt (complete, complete_batch, retry, defer, reap) ends it
  ``cancelled``, never done and never run again.
* Cancel racing complete on two connections, many rounds: exactly one outcome each round,
  and the row says the same as both replies.
* Progress is fenced by the attempt: a stale attempt's report is refused and writes
  nothing; the last report stays readable with the finished row.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis

from echomq import (
    AsyncQueue,
    CancelOutcome,
    Completion,
    InvalidArgument,
    JobNotFound,
    ProgressOutcome,
    QueueOptions,
    RetryOutcome,
    Verdict,
    generate,
)
from tests.echomq.invariants import assert_consistent


async def _leased(q: AsyncQueue, lane: str | None = None, serial: bool = False) -> Any:
    jid = generate("JOB")
    await q.admit(jid, b"p", lane=lane, serial=serial)
    leases = await q.claim(1, lease_ms=60_000, window=1)
    assert [x.id for x in leases] == [jid]
    return leases[0]


async def test_waiting_jobs_end_cancelled_at_once_and_keep_refusing_their_id(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    now, later = generate("JOB"), generate("JOB")
    await queue.enqueue(now, b"1")
    await queue.admit(later, b"2", delay_ms=3_600_000)
    assert await queue.cancel([now, later, generate("JOB")]) == [
        CancelOutcome.CANCELLED, CancelOutcome.CANCELLED, CancelOutcome.LEFT]
    assert await queue.cancel([now]) == [CancelOutcome.LEFT]  # once only
    assert assert_consistent(raw, queue.name) == {now: "done", later: "done"}
    assert (await queue.stats()).pending == (await queue.stats()).delayed == 0
    assert await queue.enqueue(now, b"again") is Verdict.DUPLICATE  # kept for keep_done_ms
    assert await queue.claim(5, lease_ms=1000) == []


async def test_a_running_job_is_asked_to_stop_and_its_completion_ends_it_cancelled(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    lease = await _leased(queue, lane="s", serial=True)
    quiet = await queue.heartbeat(lease, lease_ms=60_000)
    assert quiet is not None and not quiet.cancel
    assert await queue.cancel([lease.id]) == [CancelOutcome.ASKED]
    assert await queue.cancel([lease.id]) == [CancelOutcome.ASKED]  # asking again changes nothing
    # a longer lease than the first beat's, so the extension shows even when the server's
    # millisecond clock has not moved between the two beats
    beat = await queue.heartbeat(lease, lease_ms=120_000)
    assert beat is not None and beat.cancel and beat >= quiet + 60_000  # still extended: time to stop
    assert await queue.report_progress(lease, b"stopping") is ProgressOutcome.STOP
    assert await queue.complete(lease, b"late result") is Completion.CANCELLED
    row = await queue.job(lease.id) or {}
    assert row["state"] == b"cancelled" and "result" not in row and "payload" not in row
    assert row["progress"] == b"stopping"  # what it reported stays readable
    assert assert_consistent(raw, queue.name) == {lease.id: "done"}
    assert raw.hgetall(queue.keys["inflight"]) == {}  # its serial lane is free


@pytest.mark.parametrize("end", ["retry", "defer", "complete_many", "reap"])
async def test_every_way_an_attempt_ends_ends_a_job_asked_to_stop_cancelled(
        queue: AsyncQueue, raw: redis.Redis, end: str) -> None:
    lease = await _leased(queue)
    await queue.cancel([lease.id])
    if end == "retry":
        assert await queue.retry(lease, delay_ms=0, error="boom") is RetryOutcome.CANCELLED
    elif end == "defer":
        assert await queue.defer(lease, delay_ms=10) is RetryOutcome.CANCELLED
    elif end == "complete_many":
        assert await queue.complete_many([lease]) == [Completion.CANCELLED]
    else:
        assert await queue.heartbeat(lease, lease_ms=1) is not None  # let the lease expire
        for _ in range(500):
            reaped = await queue.reap()
            if reaped.cancelled:
                break
            await asyncio.sleep(0.01)
        assert reaped == (0, 0) and reaped.cancelled == 1
    assert assert_consistent(raw, queue.name) == {lease.id: "done"}
    assert (await queue.job(lease.id) or {})["state"] == b"cancelled"
    assert await queue.claim(1, lease_ms=1000) == []  # never runs again


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


async def test_progress_is_fenced_by_the_attempt_and_kept_with_the_finished_row(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    one = AsyncQueue(queue.connector, queue.name, options=QueueOptions(max_attempts=5))
    first = await _leased(one)
    assert await one.report_progress(first, b"10%") is ProgressOutcome.RECORDED
    assert await one.progress(first.id) == b"10%"
    await one.retry(first, delay_ms=0, error="again")
    (second,) = await one.claim(1, lease_ms=60_000)
    assert second.attempt == first.attempt + 1
    before = raw.hgetall(one.job_key(first.id))
    assert await one.report_progress(first, b"stale 99%") is ProgressOutcome.STALE  # refused
    assert raw.hgetall(one.job_key(first.id)) == before  # nothing written
    assert await one.report_progress(second, b"50%") is ProgressOutcome.RECORDED
    await one.complete(second, b"ok")
    assert await one.report_progress(second, b"after") is ProgressOutcome.STALE
    assert await one.progress(first.id) == b"50%"  # kept with the done row
    row = raw.hgetall(one.job_key(first.id))
    assert row[b"state"] == b"done" and int(row[b"progress_at"]) > 0
    with pytest.raises(InvalidArgument):
        await one.report_progress(second, b"x" * 65_537)
    with pytest.raises(JobNotFound):
        await one.progress(generate("JOB"))
    fresh = generate("JOB")
    await one.enqueue(fresh, b"p")
    assert await one.progress(fresh) is None
