"""The claim plane against a real server: leases on the server clock, the fence, retries."""

from __future__ import annotations

import pytest
import redis

from echomq import (
    AsyncConnector,
    AsyncQueue,
    Completion,
    QueueOptions,
    RetryOutcome,
    Verdict,
)
from tests.echomq._async.support import jid, wait_for
from tests.echomq.invariants import assert_consistent


async def test_claim_leases_on_the_server_clock(queue: AsyncQueue, raw: redis.Redis) -> None:
    a = jid()
    await queue.enqueue(a, b"pay")
    now = await queue.connector.server_time_ms()
    (lease,) = await queue.claim(5, lease_ms=30_000)
    assert (lease.id, lease.attempt, lease.payload, lease.lane) == (a, 1, b"pay", None)
    assert now + 29_000 <= lease.deadline_ms <= now + 31_000
    assert raw.zscore(f"emq:{{{queue.name}}}:active", a) == lease.deadline_ms
    assert raw.hget(f"emq:{{{queue.name}}}:job:{a}", "attempts") == b"1"
    assert await queue.claim(5, lease_ms=30_000) == []
    assert_consistent(raw, queue.name)


async def test_claim_takes_in_admission_order(queue: AsyncQueue) -> None:
    ids = [jid() for _ in range(20)]
    await queue.enqueue_many([(i, b"") for i in ids])
    got = [x.id for x in await queue.claim(7, lease_ms=5000)]
    got += [x.id for x in await queue.claim(20, lease_ms=5000)]
    assert got == ids


async def test_a_batch_of_leases_turns_active_into_a_skiplist_holding_only_them(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    """Decision 0054: a set that holds leases converts when a claim adds 16, a new one when
    it adds 32; the member that converts it is gone in the same step."""
    active = f"emq:{{{queue.name}}}:active"
    ids = [jid() for _ in range(80)]
    await queue.enqueue_many([(i, b"") for i in ids])
    got = await queue.claim(16, lease_ms=5000)  # a new set: 16 is below 32, a listpack
    assert raw.object("encoding", active) == b"listpack"
    got += await queue.claim(15, lease_ms=5000)  # 15 more: below 16, still a listpack
    assert raw.object("encoding", active) == b"listpack"
    got += await queue.claim(16, lease_ms=5000)  # 16 onto a set that holds leases
    assert raw.object("encoding", active) == b"skiplist"
    assert sorted(raw.zrange(active, 0, -1)) == sorted(x.id.encode() for x in got)
    assert [raw.zscore(active, x.id) for x in got] == [x.deadline_ms for x in got]
    await queue.complete_many(got)
    assert raw.exists(active) == 0
    got = await queue.claim(33, lease_ms=5000)  # a new set: 33 >= 32
    assert raw.object("encoding", active) == b"skiplist"
    assert sorted(raw.zrange(active, 0, -1)) == sorted(x.id.encode() for x in got)
    assert [x.id for x in got] == ids[47:80]
    assert_consistent(raw, queue.name)


async def test_complete_is_fenced_and_keeps_the_row(queue: AsyncQueue, raw: redis.Redis) -> None:
    a = jid()
    await queue.enqueue(a, b"x")
    (lease,) = await queue.claim(lease_ms=5000)
    stale = lease.__class__(**{**{f: getattr(lease, f) for f in lease.__slots__}, "attempt": 7})
    assert await queue.complete(stale) is Completion.STALE
    assert raw.hget(f"emq:{{{queue.name}}}:job:{a}", "state") == b"active"
    assert await queue.complete(lease, b"ok") is Completion.COMPLETED
    assert await queue.complete(lease) is Completion.STALE
    assert await queue.heartbeat(lease, lease_ms=5000) is None
    assert raw.hget(f"emq:{{{queue.name}}}:job:{a}", "result") == b"ok"
    assert await queue.enqueue(a, b"again") is Verdict.DUPLICATE  # retention refuses it
    assert assert_consistent(raw, queue.name) == {a: "done"}


async def test_keep_zero_deletes_at_completion(conn: AsyncConnector, qname: str,
                                               raw: redis.Redis) -> None:
    q = AsyncQueue(conn, qname, options=QueueOptions(keep_done_ms=0))
    a = jid()
    await q.enqueue(a, b"x")
    (lease,) = await q.claim(lease_ms=5000)
    assert await q.complete(lease) is Completion.COMPLETED
    assert assert_consistent(raw, qname) == {}
    assert raw.exists(f"emq:{{{qname}}}:active") == 0


async def test_retention_trims_old_done_rows(conn: AsyncConnector, qname: str,
                                             raw: redis.Redis) -> None:
    q = AsyncQueue(conn, qname, options=QueueOptions(keep_done_ms=50))
    a, b = jid(), jid()
    await q.enqueue_many([(a, b""), (b, b"")])
    for lease in await q.claim(2, lease_ms=5000):
        await q.complete(lease)
    trimmed = 0

    async def both_trimmed() -> bool:  # each row leaves once its own window has passed
        nonlocal trimmed
        trimmed += await q.trim()
        return trimmed >= 2

    await wait_for(both_trimmed)
    assert trimmed == 2
    assert assert_consistent(raw, qname) == {}
    assert await q.enqueue(a, b"") is Verdict.ENQUEUED  # after the window the id is free


async def test_heartbeat_extends_only_the_current_attempt(queue: AsyncQueue) -> None:
    await queue.enqueue(jid(), b"x")
    (lease,) = await queue.claim(lease_ms=1000)
    later = await queue.heartbeat(lease, lease_ms=60_000)
    assert later is not None and later > lease.deadline_ms
    older = lease.__class__(**{**{f: getattr(lease, f) for f in lease.__slots__}, "attempt": 0})
    assert await queue.heartbeat(older, lease_ms=60_000) is None


async def test_retry_backoff_then_dead_with_last_error(conn: AsyncConnector, qname: str,
                                                       raw: redis.Redis) -> None:
    q = AsyncQueue(conn, qname, options=QueueOptions(max_attempts=2))
    a = jid()
    await q.enqueue(a, b"x")
    (first,) = await q.claim(lease_ms=5000)
    assert await q.retry(first, delay_ms=60_000, error="boom 1") is RetryOutcome.SCHEDULED
    assert assert_consistent(raw, qname) == {a: "delayed"}
    assert await q.retry(first, delay_ms=0, error="late") is RetryOutcome.STALE
    raw.zadd(f"emq:{{{qname}}}:delayed", {a: 0})  # make it due now
    assert await q.promote() == 1
    (second,) = await q.claim(lease_ms=5000)
    assert second.attempt == 2
    assert await q.retry(second, delay_ms=0, error="boom 2") is RetryOutcome.DEAD
    row = raw.hgetall(f"emq:{{{qname}}}:job:{a}")
    assert row[b"error"] == b"boom 2" and row[b"failures"] == b"2" and row[b"state"] == b"dead"
    assert assert_consistent(raw, qname) == {a: "dead"}
    assert await q.requeue_dead() == 1
    (third,) = await q.claim(lease_ms=5000)
    assert third.attempt == 3  # the fencing token never goes back
    assert await q.complete(third) is Completion.COMPLETED


async def test_defer_counts_no_failure(conn: AsyncConnector, qname: str, raw: redis.Redis) -> None:
    q = AsyncQueue(conn, qname, options=QueueOptions(max_attempts=1))
    a = jid()
    await q.enqueue(a, b"x")
    for _ in range(3):
        (lease,) = await q.claim(lease_ms=5000)
        assert await q.defer(lease, delay_ms=0) is RetryOutcome.SCHEDULED
    assert raw.hget(f"emq:{{{qname}}}:job:{a}", "failures") is None
    assert assert_consistent(raw, qname) == {a: "pending"}


async def test_delayed_admission_waits_for_the_server_clock(queue: AsyncQueue,
                                                            raw: redis.Redis) -> None:
    a, b = jid(), jid()
    assert await queue.admit(a, b"later", delay_ms=300) is Verdict.ENQUEUED
    assert await queue.admit(b, b"much later", delay_ms=600_000) is Verdict.ENQUEUED
    assert await queue.claim(lease_ms=5000) == []
    assert await queue.promote() == 0
    assert await wait_for(queue.promote) == 1
    (lease,) = await queue.claim(lease_ms=5000)
    assert lease.id == a
    assert assert_consistent(raw, queue.name) == {a: "active", b: "delayed"}


async def test_reap_reexposes_an_expired_lease(conn: AsyncConnector, qname: str,
                                               raw: redis.Redis) -> None:
    q = AsyncQueue(conn, qname, options=QueueOptions(max_attempts=2))
    a = jid()
    await q.enqueue(a, b"x")
    (lost,) = await q.claim(lease_ms=50)
    assert await wait_for(lambda: _reaped(q)) == (1, 0)
    (again,) = await q.claim(lease_ms=50)
    assert again.attempt == 2
    assert await q.complete(lost) is Completion.STALE  # the expired worker cannot finish
    assert await wait_for(lambda: _reaped(q, dead=True)) == (0, 1)
    assert raw.hget(f"emq:{{{qname}}}:job:{a}", "error") == b"lease expired"
    assert assert_consistent(raw, qname) == {a: "dead"}
    assert await q.purge_dead() == 1
    assert assert_consistent(raw, qname) == {}


async def _reaped(q: AsyncQueue, dead: bool = False) -> tuple[int, int] | None:
    got = await q.reap()
    return got if got[1 if dead else 0] else None


async def test_browse_stats_and_sizes(queue: AsyncQueue, raw: redis.Redis) -> None:
    ids = [jid() for _ in range(5)]
    await queue.enqueue_many([(i, b"p" + i.encode()) for i in ids])
    (lease,) = await queue.claim(lease_ms=5000)
    await queue.complete(lease)
    stats = await queue.stats()
    assert (stats.pending, stats.active, stats.done, stats.total) == (4, 0, 1, 5)
    assert await queue.pending_size() == 4
    page = await queue.browse("pending", offset=1, limit=2)
    assert [v.id for v in page] == ids[2:4]
    assert page[0].state == "pending" and page[0].row["payload"] == b"p" + ids[2].encode()
    assert [v.id for v in await queue.browse("done")] == ids[:1]
    with pytest.raises(ValueError, match="state"):
        await queue.browse("nope")


async def test_invalid_arguments_write_nothing(queue: AsyncQueue, raw: redis.Redis) -> None:
    with pytest.raises(ValueError, match="delay_ms"):
        await queue.admit(jid(), b"x", delay_ms=-1)
    with pytest.raises(ValueError, match="count"):
        await queue.claim(0, lease_ms=10)
    # and the server-side checks hold even for a client that skips ours
    from echomq import InvalidArgument
    from echomq.protocol.scripts import load

    k, job = queue.keys, jid()
    with pytest.raises(InvalidArgument, match="EMQARG"):
        await queue.connector.eval(
            load("admit"),
            [queue.job_key(job), k["pending"], k["delayed"], k["lanes"], k["meta"], k["wake"],
             k["expiring"]],
            [job, b"x", "", "-5", "0", "", "0", "", "", ""],
        )
    assert assert_consistent(raw, queue.name) == {}
