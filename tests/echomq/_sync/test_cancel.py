# Generated from tests/echomq/_async/test_cancel.py by scripts/unasync_gen.py. Do not edit.
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
    CancelOutcome,
    Completion,
    InvalidArgument,
    JobNotFound,
    ProgressOutcome,
    Queue,
    QueueOptions,
    RetryOutcome,
    Verdict,
    generate,
)
from tests.echomq._sync.support import wait_for
from tests.echomq.invariants import assert_consistent


def _leased(q: Queue, lane: str | None = None, serial: bool = False) -> Any:
    jid = generate("JOB")
    q.admit(jid, b"p", lane=lane, serial=serial)
    leases = q.claim(1, lease_ms=60_000, window=1)
    assert [x.id for x in leases] == [jid]
    return leases[0]


def test_waiting_jobs_end_cancelled_at_once_and_keep_refusing_their_id(
        queue: Queue, raw: redis.Redis) -> None:
    now, later = generate("JOB"), generate("JOB")
    queue.enqueue(now, b"1")
    queue.admit(later, b"2", delay_ms=3_600_000)
    assert queue.cancel([now, later, generate("JOB")]) == [
        CancelOutcome.CANCELLED, CancelOutcome.CANCELLED, CancelOutcome.LEFT]
    assert queue.cancel([now]) == [CancelOutcome.LEFT]  # once only
    assert assert_consistent(raw, queue.name) == {now: "done", later: "done"}
    assert (queue.stats()).pending == (queue.stats()).delayed == 0
    assert queue.enqueue(now, b"again") is Verdict.DUPLICATE  # kept for keep_done_ms
    assert queue.claim(5, lease_ms=1000) == []


def test_a_running_job_is_asked_to_stop_and_its_completion_ends_it_cancelled(
        queue: Queue, raw: redis.Redis) -> None:
    lease = _leased(queue, lane="s", serial=True)
    quiet = queue.heartbeat(lease, lease_ms=60_000)
    assert quiet is not None and not quiet.cancel
    assert queue.cancel([lease.id]) == [CancelOutcome.ASKED]
    assert queue.cancel([lease.id]) == [CancelOutcome.ASKED]  # asking again changes nothing
    # a longer lease than the first beat's, so the extension shows even when the server's
    # millisecond clock has not moved between the two beats
    beat = queue.heartbeat(lease, lease_ms=120_000)
    assert beat is not None and beat.cancel and beat >= quiet + 60_000  # still extended: time to stop
    assert queue.report_progress(lease, b"stopping") is ProgressOutcome.STOP
    assert queue.complete(lease, b"late result") is Completion.CANCELLED
    row = queue.job(lease.id) or {}
    assert row["state"] == b"cancelled" and "result" not in row and "payload" not in row
    assert row["progress"] == b"stopping"  # what it reported stays readable
    assert assert_consistent(raw, queue.name) == {lease.id: "done"}
    assert raw.hgetall(queue.keys["inflight"]) == {}  # its serial lane is free


@pytest.mark.parametrize("end", ["retry", "defer", "complete_many", "reap"])
def test_every_way_an_attempt_ends_ends_a_job_asked_to_stop_cancelled(
        queue: Queue, raw: redis.Redis, end: str) -> None:
    lease = _leased(queue)
    queue.cancel([lease.id])
    if end == "retry":
        assert queue.retry(lease, delay_ms=0, error="boom") is RetryOutcome.CANCELLED
    elif end == "defer":
        assert queue.defer(lease, delay_ms=10) is RetryOutcome.CANCELLED
    elif end == "complete_many":
        assert queue.complete_many([lease]) == [Completion.CANCELLED]
    else:
        assert queue.heartbeat(lease, lease_ms=1) is not None  # let the lease expire

        def reaped_one() -> Any:
            reaped = queue.reap()
            return reaped if reaped.cancelled else None

        reaped = wait_for(reaped_one)
        assert reaped == (0, 0) and reaped.cancelled == 1
    assert assert_consistent(raw, queue.name) == {lease.id: "done"}
    assert (queue.job(lease.id) or {})["state"] == b"cancelled"
    assert queue.claim(1, lease_ms=1000) == []  # never runs again


def test_progress_is_fenced_by_the_attempt_and_kept_with_the_finished_row(
        queue: Queue, raw: redis.Redis) -> None:
    one = Queue(queue.connector, queue.name, options=QueueOptions(max_attempts=5))
    first = _leased(one)
    assert one.report_progress(first, b"10%") is ProgressOutcome.RECORDED
    assert one.progress(first.id) == b"10%"
    one.retry(first, delay_ms=0, error="again")
    (second,) = one.claim(1, lease_ms=60_000)
    assert second.attempt == first.attempt + 1
    before = raw.hgetall(one.job_key(first.id))
    assert one.report_progress(first, b"stale 99%") is ProgressOutcome.STALE  # refused
    assert raw.hgetall(one.job_key(first.id)) == before  # nothing written
    assert one.report_progress(second, b"50%") is ProgressOutcome.RECORDED
    one.complete(second, b"ok")
    assert one.report_progress(second, b"after") is ProgressOutcome.STALE
    assert one.progress(first.id) == b"50%"  # kept with the done row
    row = raw.hgetall(one.job_key(first.id))
    assert row[b"state"] == b"done" and int(row[b"progress_at"]) > 0
    with pytest.raises(InvalidArgument):
        one.report_progress(second, b"x" * 65_537)
    with pytest.raises(JobNotFound):
        one.progress(generate("JOB"))
    fresh = generate("JOB")
    one.enqueue(fresh, b"p")
    assert one.progress(fresh) is None
