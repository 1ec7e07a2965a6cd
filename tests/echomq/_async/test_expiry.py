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
    AsyncQueue,
    InvalidArgument,
    JobExpired,
    QueueOptions,
    RetryOutcome,
    Verdict,
    generate,
)
from tests.echomq._async.support import wait_for
from tests.echomq.invariants import assert_consistent

SHORT = 1_000  # ms: long enough to claim in time on a loaded machine, short to wait out


async def _past(q: AsyncQueue, job_id: str) -> None:
    """Wait until the server's clock has passed the job's deadline."""
    deadline = int((await q.job(job_id) or {})["exp"])

    async def passed() -> bool:
        return await q.connector.server_time_ms() > deadline

    await wait_for(passed, within=SHORT / 1000 + 5)


async def test_a_job_past_its_deadline_is_never_leased_and_ends_expired(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    late, fresh = generate("JOB"), generate("JOB")
    assert await queue.admit(late, b"late", expires_ms=SHORT) is Verdict.ENQUEUED
    await _past(queue, late)
    await queue.admit(fresh, b"fresh", expires_ms=600_000)
    leases = await queue.claim(5, lease_ms=60_000)
    assert [x.id for x in leases] == [fresh]  # the late one is not run, the other is
    row = await queue.job(late) or {}
    assert row["state"] == b"expired" and row["payload"] == b"late" and row["attempts"] == b"0"
    assert (await queue.stats()).expired == 1
    assert assert_consistent(raw, queue.name) == {late: "expired", fresh: "active"}
    assert raw.zrange(queue.keys["expiring"], 0, -1) == []  # neither waits any more
    with pytest.raises(JobExpired) as err:
        await queue.result(late, timeout=0)
    assert err.value.job_id == late and err.value.deadline_ms == int(row["exp"])
    assert await queue.admit(late, b"again", expires_ms=SHORT) is Verdict.DUPLICATE


async def test_the_reaper_ends_unclaimed_jobs_in_bounded_steps_and_leaves_the_rest(
        conn: Any, qname: str, raw: redis.Redis) -> None:
    q = AsyncQueue(conn, qname, options=QueueOptions(reap_batch=2))
    ids = [generate("JOB") for _ in range(5)]
    for i in ids:
        await q.admit(i, b"p", expires_ms=SHORT)
    later = generate("JOB")
    await q.admit(later, b"p", expires_ms=600_000)
    assert await q.expire() == (0, 0)  # nothing is due yet
    await _past(q, ids[-1])
    assert await q.expire() == (2, 0)  # at most reap_batch a call
    assert (await q.stats()).expired == 2
    assert await q.expire() == (2, 0)
    assert await q.expire() == (1, 0)
    assert await q.expire() == (0, 0)  # the one not due stays waiting, indexed
    where = assert_consistent(raw, qname)
    assert [i for i in ids if where[i] == "expired"] == ids and where[later] == "pending"
    assert raw.zrange(q.keys["expiring"], 0, -1) == [later.encode()]


async def test_a_delayed_job_expires_where_it_waits(queue: AsyncQueue, raw: redis.Redis) -> None:
    job = generate("JOB")
    await queue.admit(job, b"p", delay_ms=600_000, expires_ms=600_001)
    raw.zadd(queue.keys["expiring"], {job: 1})  # its deadline, moved to the past
    raw.hset(queue.job_key(job), "exp", 1)
    assert await queue.expire() == (1, 0)
    assert assert_consistent(raw, queue.name) == {job: "expired"}


async def test_a_retry_keeps_the_deadline_and_its_wait_counts(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    job = generate("JOB")
    await queue.admit(job, b"p", expires_ms=SHORT)
    (lease,) = await queue.claim(1, lease_ms=60_000)  # started in time: off the index
    assert raw.zrange(queue.keys["expiring"], 0, -1) == []
    assert await queue.retry(lease, delay_ms=600_000, error="boom") is RetryOutcome.SCHEDULED
    assert raw.zrange(queue.keys["expiring"], 0, -1) == [job.encode()]  # back on it
    await _past(queue, job)
    assert await queue.expire() == (1, 0)  # its wait passed the deadline: expired, not run
    row = await queue.job(job) or {}
    assert row["state"] == b"expired" and row["error"] == b"boom"
    assert assert_consistent(raw, queue.name) == {job: "expired"}


async def test_a_retry_due_after_the_deadline_is_refused_by_claim_too(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    job = generate("JOB")
    await queue.admit(job, b"p", expires_ms=SHORT)
    (lease,) = await queue.claim(1, lease_ms=60_000)
    assert await queue.retry(lease, delay_ms=0, error="boom") is RetryOutcome.SCHEDULED
    await _past(queue, job)
    assert await queue.claim(1, lease_ms=60_000) == []
    assert assert_consistent(raw, queue.name) == {job: "expired"}


async def test_an_expired_job_frees_its_serial_lane_for_the_next(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    first, second = generate("JOB"), generate("JOB")
    await queue.admit(first, b"1", lane="s", serial=True, expires_ms=SHORT)
    await queue.admit(second, b"2", lane="s", serial=True)
    (lease,) = await queue.claim(2, lease_ms=60_000)
    assert lease.id == first  # the lane holds one job in flight
    await queue.retry(lease, delay_ms=0, error="again")  # still holds the lane
    await _past(queue, first)
    leases = await queue.claim(2, lease_ms=60_000)
    assert [x.id for x in leases] == [second]  # first expired, the lane went to second
    assert raw.hget(queue.keys["inflight"], "s") == second.encode()
    assert assert_consistent(raw, queue.name) == {first: "expired", second: "active"}


async def test_priority_never_makes_an_expired_job_run(queue: AsyncQueue, raw: redis.Redis) -> None:
    urgent, plain = generate("JOB"), generate("JOB")
    await queue.admit(urgent, b"u", priority=3, expires_ms=SHORT)
    await _past(queue, urgent)
    await queue.admit(plain, b"p")
    assert [x.id for x in await queue.claim(2, lease_ms=60_000)] == [plain]
    assert assert_consistent(raw, queue.name) == {urgent: "expired", plain: "active"}


async def test_a_paused_queue_still_expires_its_waiting_jobs(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    job = generate("JOB")
    await queue.admit(job, b"p", expires_ms=SHORT)
    await queue.pause()
    await _past(queue, job)
    claimed = await queue.claim(1, lease_ms=60_000)
    assert claimed == [] and claimed.paused
    assert assert_consistent(raw, queue.name) == {job: "expired"}


async def test_expired_rows_are_kept_for_their_own_retention(
        conn: Any, qname: str, raw: redis.Redis) -> None:
    q = AsyncQueue(conn, qname, options=QueueOptions(keep_expired_ms=0, keep_done_ms=600_000))
    job = generate("JOB")
    await q.admit(job, b"p", expires_ms=SHORT)
    await _past(q, job)
    assert await q.expire() == (1, 0)
    assert await q.trim() == 1  # expired rows kept 0 ms: trimmed
    assert assert_consistent(raw, qname) == {}
    assert QueueOptions().keep_expired_ms == QueueOptions().keep_dead_ms > QueueOptions().keep_done_ms


async def test_the_index_drops_entries_of_jobs_that_no_longer_wait(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    job = generate("JOB")
    await queue.admit(job, b"p", expires_ms=SHORT)
    await queue.cancel([job])  # cancelled: its index entry is stale
    await _past(queue, job)
    assert await queue.expire() == (0, 1)
    assert raw.zrange(queue.keys["expiring"], 0, -1) == []
    assert assert_consistent(raw, queue.name) == {job: "done"}


async def test_a_job_without_a_deadline_writes_nothing_of_expiry(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    plain, laned = generate("JOB"), generate("JOB")
    await queue.enqueue(plain, b"p")
    await queue.admit(laned, b"p", lane="a", priority=1, delay_ms=1)
    for job in (plain, laned):
        assert "exp" not in (await queue.job(job) or {})
    assert not raw.exists(queue.keys["expiring"])
    await queue.claim(2, lease_ms=60_000)
    assert not raw.exists(queue.keys["expiring"]) and not raw.exists(queue.keys["expired"])


async def test_many_jobs_share_the_deadline_option(queue: AsyncQueue, raw: redis.Redis) -> None:
    ids = [generate("JOB") for _ in range(3)]
    verdicts = await queue.admit_many([(i, b"p") for i in ids], expires_ms=SHORT)
    assert verdicts == [Verdict.ENQUEUED] * 3
    assert raw.zcard(queue.keys["expiring"]) == 3
    await _past(queue, ids[-1])
    assert await queue.claim(3, lease_ms=60_000) == []
    assert (await queue.stats()).expired == 3


@pytest.mark.parametrize("mode", ["throttle", "debounce"])
async def test_a_deduped_admission_keeps_its_deadline(
        queue: AsyncQueue, raw: redis.Redis, mode: str) -> None:
    job = generate("JOB")
    got = await queue.admit(job, b"p", dedupe_ms=60_000, dedupe_key="k", dedupe_mode=mode,
                            expires_ms=SHORT)
    assert got is Verdict.ENQUEUED
    row = await queue.job(job) or {}
    assert raw.zscore(queue.keys["expiring"], job) == float(row["exp"])
    await _past(queue, job)
    assert await queue.claim(1, lease_ms=60_000) == []
    assert (await queue.stats()).expired == 1
    assert await queue.admit(generate("JOB"), b"p", dedupe_ms=60_000, dedupe_key="k",
                             dedupe_mode="throttle", expires_ms=SHORT) is Verdict.DUPLICATE


@pytest.mark.parametrize("kwargs", [
    {"expires_ms": 0}, {"expires_ms": -1}, {"expires_ms": True}, {"expires_ms": "5"},
    {"expires_ms": 1.5}, {"expires_ms": 366 * 86_400_000 + 1},
    {"expires_ms": 1000, "delay_ms": 1000}, {"expires_ms": 10, "delay_ms": 20},
])
async def test_a_bad_deadline_is_refused_before_any_write(
        queue: AsyncQueue, raw: redis.Redis, kwargs: dict[str, Any]) -> None:
    job = generate("JOB")
    with pytest.raises(InvalidArgument):
        await queue.admit(job, b"p", **kwargs)
    with pytest.raises(InvalidArgument):
        await queue.admit_many([(job, b"p")], **kwargs)
    assert await queue.job(job) is None
    assert not raw.exists(queue.keys["meta"])  # not even the queue's version was written
