# Generated from tests/echomq/_async/test_expiry.py by scripts/unasync_gen.py. Do not edit.
"""Expiry (issue 28 item 4; docs/decisions/0045-expiry.md), on both topologies and both
APIs (written once for asyncio; the blocking copy is generated).

* ``admit(..., expires_ms=)``: a job not started by its deadline (server clock) ends
  ``expired`` and never runs: claim refuses to lease it and ends it in the same step;
  the upkeep's reaper ends the ones nobody claims, a bounded number per call.
* The deadline is fixed at admission: a delay counts against it, and so does a retry's
  wait; once started in time, an attempt runs to its end.
* An expired row is kept (the id refuses duplicates) in its own set with its own count,
  and a waiter learns ``JobExpired``.
* A job without a deadline writes nothing of it (no field, no index entry).

Deadlines here are short (about a second) and the tests wait on the server's clock
passing them, never on a sleep standing in for it.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis

from echomq import (
    InvalidArgument,
    JobExpired,
    Queue,
    QueueOptions,
    RetryOutcome,
    Verdict,
    generate,
)
from tests.echomq._sync.support import wait_for
from tests.echomq.invariants import assert_consistent

SHORT = 1_000  # ms: long enough to claim in time on a loaded machine, short to wait out


def _past(q: Queue, job_id: str) -> None:
    """Wait until the server's clock has passed the job's deadline."""
    deadline = int((q.job(job_id) or {})["exp"])

    def passed() -> bool:
        return q.connector.server_time_ms() > deadline

    wait_for(passed, within=SHORT / 1000 + 5)


def test_a_job_past_its_deadline_is_never_leased_and_ends_expired(
        queue: Queue, raw: redis.Redis) -> None:
    late, fresh = generate("JOB"), generate("JOB")
    assert queue.admit(late, b"late", expires_ms=SHORT) is Verdict.ENQUEUED
    _past(queue, late)
    queue.admit(fresh, b"fresh", expires_ms=600_000)
    leases = queue.claim(5, lease_ms=60_000)
    assert [x.id for x in leases] == [fresh]  # the late one is not run, the other is
    row = queue.job(late) or {}
    assert row["state"] == b"expired" and row["payload"] == b"late" and row["attempts"] == b"0"
    assert (queue.stats()).expired == 1
    assert assert_consistent(raw, queue.name) == {late: "expired", fresh: "active"}
    assert raw.zrange(queue.keys["expiring"], 0, -1) == []  # neither waits any more
    with pytest.raises(JobExpired) as err:
        queue.result(late, timeout=0)
    assert err.value.job_id == late and err.value.deadline_ms == int(row["exp"])
    assert queue.admit(late, b"again", expires_ms=SHORT) is Verdict.DUPLICATE


def test_the_reaper_ends_unclaimed_jobs_in_bounded_steps_and_leaves_the_rest(
        conn: Any, qname: str, raw: redis.Redis) -> None:
    q = Queue(conn, qname, options=QueueOptions(reap_batch=2))
    ids = [generate("JOB") for _ in range(5)]
    for i in ids:
        q.admit(i, b"p", expires_ms=SHORT)
    later = generate("JOB")
    q.admit(later, b"p", expires_ms=600_000)
    assert q.expire() == (0, 0)  # nothing is due yet
    _past(q, ids[-1])
    assert q.expire() == (2, 0)  # at most reap_batch a call
    assert (q.stats()).expired == 2
    assert q.expire() == (2, 0)
    assert q.expire() == (1, 0)
    assert q.expire() == (0, 0)  # the one not due stays waiting, indexed
    where = assert_consistent(raw, qname)
    assert [i for i in ids if where[i] == "expired"] == ids and where[later] == "pending"
    assert raw.zrange(q.keys["expiring"], 0, -1) == [later.encode()]


def test_a_delayed_job_expires_where_it_waits(queue: Queue, raw: redis.Redis) -> None:
    job = generate("JOB")
    queue.admit(job, b"p", delay_ms=600_000, expires_ms=600_001)
    raw.zadd(queue.keys["expiring"], {job: 1})  # its deadline, moved to the past
    raw.hset(queue.job_key(job), "exp", 1)
    assert queue.expire() == (1, 0)
    assert assert_consistent(raw, queue.name) == {job: "expired"}


def test_a_retry_keeps_the_deadline_and_its_wait_counts(
        queue: Queue, raw: redis.Redis) -> None:
    job = generate("JOB")
    queue.admit(job, b"p", expires_ms=SHORT)
    (lease,) = queue.claim(1, lease_ms=60_000)  # started in time: off the index
    assert raw.zrange(queue.keys["expiring"], 0, -1) == []
    assert queue.retry(lease, delay_ms=600_000, error="boom") is RetryOutcome.SCHEDULED
    assert raw.zrange(queue.keys["expiring"], 0, -1) == [job.encode()]  # back on it
    _past(queue, job)
    assert queue.expire() == (1, 0)  # its wait passed the deadline: expired, not run
    row = queue.job(job) or {}
    assert row["state"] == b"expired" and row["error"] == b"boom"
    assert assert_consistent(raw, queue.name) == {job: "expired"}


def test_a_retry_due_after_the_deadline_is_refused_by_claim_too(
        queue: Queue, raw: redis.Redis) -> None:
    job = generate("JOB")
    queue.admit(job, b"p", expires_ms=SHORT)
    (lease,) = queue.claim(1, lease_ms=60_000)
    assert queue.retry(lease, delay_ms=0, error="boom") is RetryOutcome.SCHEDULED
    _past(queue, job)
    assert queue.claim(1, lease_ms=60_000) == []
    assert assert_consistent(raw, queue.name) == {job: "expired"}


def test_an_expired_job_frees_its_serial_lane_for_the_next(
        queue: Queue, raw: redis.Redis) -> None:
    first, second = generate("JOB"), generate("JOB")
    queue.admit(first, b"1", lane="s", serial=True, expires_ms=SHORT)
    queue.admit(second, b"2", lane="s", serial=True)
    (lease,) = queue.claim(2, lease_ms=60_000)
    assert lease.id == first  # the lane holds one job in flight
    queue.retry(lease, delay_ms=0, error="again")  # still holds the lane
    _past(queue, first)
    leases = queue.claim(2, lease_ms=60_000)
    assert [x.id for x in leases] == [second]  # first expired, the lane went to second
    assert raw.hget(queue.keys["inflight"], "s") == second.encode()
    assert assert_consistent(raw, queue.name) == {first: "expired", second: "active"}


def test_priority_never_makes_an_expired_job_run(queue: Queue, raw: redis.Redis) -> None:
    urgent, plain = generate("JOB"), generate("JOB")
    queue.admit(urgent, b"u", priority=3, expires_ms=SHORT)
    _past(queue, urgent)
    queue.admit(plain, b"p")
    assert [x.id for x in queue.claim(2, lease_ms=60_000)] == [plain]
    assert assert_consistent(raw, queue.name) == {urgent: "expired", plain: "active"}


def test_a_paused_queue_still_expires_its_waiting_jobs(
        queue: Queue, raw: redis.Redis) -> None:
    job = generate("JOB")
    queue.admit(job, b"p", expires_ms=SHORT)
    queue.pause()
    _past(queue, job)
    claimed = queue.claim(1, lease_ms=60_000)
    assert claimed == [] and claimed.paused
    assert assert_consistent(raw, queue.name) == {job: "expired"}


def test_expired_rows_are_kept_for_their_own_retention(
        conn: Any, qname: str, raw: redis.Redis) -> None:
    q = Queue(conn, qname, options=QueueOptions(keep_expired_ms=0, keep_done_ms=600_000))
    job = generate("JOB")
    q.admit(job, b"p", expires_ms=SHORT)
    _past(q, job)
    assert q.expire() == (1, 0)
    assert q.trim() == 1  # expired rows kept 0 ms: trimmed
    assert assert_consistent(raw, qname) == {}
    assert QueueOptions().keep_expired_ms == QueueOptions().keep_dead_ms > QueueOptions().keep_done_ms


def test_the_index_drops_entries_of_jobs_that_no_longer_wait(
        queue: Queue, raw: redis.Redis) -> None:
    job = generate("JOB")
    queue.admit(job, b"p", expires_ms=SHORT)
    queue.cancel([job])  # cancelled: its index entry is stale
    _past(queue, job)
    assert queue.expire() == (0, 1)
    assert raw.zrange(queue.keys["expiring"], 0, -1) == []
    assert assert_consistent(raw, queue.name) == {job: "done"}


def test_a_job_without_a_deadline_writes_nothing_of_expiry(
        queue: Queue, raw: redis.Redis) -> None:
    plain, laned = generate("JOB"), generate("JOB")
    queue.enqueue(plain, b"p")
    queue.admit(laned, b"p", lane="a", priority=1, delay_ms=1)
    for job in (plain, laned):
        assert "exp" not in (queue.job(job) or {})
    assert not raw.exists(queue.keys["expiring"])
    queue.claim(2, lease_ms=60_000)
    assert not raw.exists(queue.keys["expiring"]) and not raw.exists(queue.keys["expired"])


def test_many_jobs_share_the_deadline_option(queue: Queue, raw: redis.Redis) -> None:
    ids = [generate("JOB") for _ in range(3)]
    verdicts = queue.admit_many([(i, b"p") for i in ids], expires_ms=SHORT)
    assert verdicts == [Verdict.ENQUEUED] * 3
    assert raw.zcard(queue.keys["expiring"]) == 3
    _past(queue, ids[-1])
    assert queue.claim(3, lease_ms=60_000) == []
    assert (queue.stats()).expired == 3


@pytest.mark.parametrize("mode", ["throttle", "debounce"])
def test_a_deduped_admission_keeps_its_deadline(
        queue: Queue, raw: redis.Redis, mode: str) -> None:
    job = generate("JOB")
    got = queue.admit(job, b"p", dedupe_ms=60_000, dedupe_key="k", dedupe_mode=mode,
                            expires_ms=SHORT)
    assert got is Verdict.ENQUEUED
    row = queue.job(job) or {}
    assert raw.zscore(queue.keys["expiring"], job) == float(row["exp"])
    _past(queue, job)
    assert queue.claim(1, lease_ms=60_000) == []
    assert (queue.stats()).expired == 1
    assert queue.admit(generate("JOB"), b"p", dedupe_ms=60_000, dedupe_key="k",
                             dedupe_mode="throttle", expires_ms=SHORT) is Verdict.DUPLICATE


@pytest.mark.parametrize("kwargs", [
    {"expires_ms": 0}, {"expires_ms": -1}, {"expires_ms": True}, {"expires_ms": "5"},
    {"expires_ms": 1.5}, {"expires_ms": 366 * 86_400_000 + 1},
    {"expires_ms": 1000, "delay_ms": 1000}, {"expires_ms": 10, "delay_ms": 20},
])
def test_a_bad_deadline_is_refused_before_any_write(
        queue: Queue, raw: redis.Redis, kwargs: dict[str, Any]) -> None:
    job = generate("JOB")
    with pytest.raises(InvalidArgument):
        queue.admit(job, b"p", **kwargs)
    with pytest.raises(InvalidArgument):
        queue.admit_many([(job, b"p")], **kwargs)
    assert queue.job(job) is None
    assert not raw.exists(queue.keys["meta"])  # not even the queue's version was written
