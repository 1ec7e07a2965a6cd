"""Cancellation and progress (issue 14 items 6 and 7; docs/decisions/0023), on both
topologies and both APIs (written once for asyncio; the blocking copy is generated).

* A pending or delayed job is cancelled in one step: off its set, its serial lane freed,
  a ``cancelled`` row kept in the done set (the id still refuses duplicates).
* A running job is asked to stop: its heartbeat (and progress report) says so, and
  whichever script ends the attempt (complete, complete_batch, retry, defer, reap) ends it
  ``cancelled``, never done and never run again.
* Progress is fenced by the attempt: a stale attempt's report is refused and writes
  nothing; the last report stays readable with the finished row.

Cancel racing complete and claim (two calls in flight at once): tests/echomq/test_cancel_races.py.
"""

from __future__ import annotations

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
from tests.echomq._async.support import wait_for
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

        async def reaped_one() -> Any:
            reaped = await queue.reap()
            return reaped if reaped.cancelled else None

        reaped = await wait_for(reaped_one)
        assert reaped == (0, 0) and reaped.cancelled == 1
    assert assert_consistent(raw, queue.name) == {lease.id: "done"}
    assert (await queue.job(lease.id) or {})["state"] == b"cancelled"
    assert await queue.claim(1, lease_ms=1000) == []  # never runs again


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
