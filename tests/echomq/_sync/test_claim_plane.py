# Generated from tests/echomq/_async/test_claim_plane.py by scripts/unasync_gen.py. Do not edit.
"""The claim plane against a real server: leases on the server clock, the fence, retries."""

from __future__ import annotations

import pytest
import redis

from echomq import (
    Completion,
    Connector,
    Queue,
    QueueOptions,
    RetryOutcome,
    Verdict,
)
from tests.echomq._sync.support import jid, wait_for
from tests.echomq.invariants import assert_consistent


def test_claim_leases_on_the_server_clock(queue: Queue, raw: redis.Redis) -> None:
    a = jid()
    queue.enqueue(a, b"pay")
    now = queue.connector.server_time_ms()
    (lease,) = queue.claim(5, lease_ms=30_000)
    assert (lease.id, lease.attempt, lease.payload, lease.lane) == (a, 1, b"pay", None)
    assert now + 29_000 <= lease.deadline_ms <= now + 31_000
    assert raw.zscore(f"emq:{{{queue.name}}}:active", a) == lease.deadline_ms
    assert raw.hget(f"emq:{{{queue.name}}}:job:{a}", "attempts") == b"1"
    assert queue.claim(5, lease_ms=30_000) == []
    assert_consistent(raw, queue.name)


def test_claim_takes_in_admission_order(queue: Queue) -> None:
    ids = [jid() for _ in range(20)]
    queue.enqueue_many([(i, b"") for i in ids])
    got = [x.id for x in queue.claim(7, lease_ms=5000)]
    got += [x.id for x in queue.claim(20, lease_ms=5000)]
    assert got == ids


def test_a_batch_of_leases_turns_active_into_a_skiplist_holding_only_them(
        queue: Queue, raw: redis.Redis) -> None:
    """Decision 0054: a set that holds leases converts when a claim adds 16, a new one when
    it adds 32; the member that converts it is gone in the same step."""
    active = f"emq:{{{queue.name}}}:active"
    ids = [jid() for _ in range(80)]
    queue.enqueue_many([(i, b"") for i in ids])
    got = queue.claim(16, lease_ms=5000)  # a new set: 16 is below 32, a listpack
    assert raw.object("encoding", active) == b"listpack"
    got += queue.claim(15, lease_ms=5000)  # 15 more: below 16, still a listpack
    assert raw.object("encoding", active) == b"listpack"
    got += queue.claim(16, lease_ms=5000)  # 16 onto a set that holds leases
    assert raw.object("encoding", active) == b"skiplist"
    assert sorted(raw.zrange(active, 0, -1)) == sorted(x.id.encode() for x in got)
    assert [raw.zscore(active, x.id) for x in got] == [x.deadline_ms for x in got]
    queue.complete_many(got)
    assert raw.exists(active) == 0
    got = queue.claim(33, lease_ms=5000)  # a new set: 33 >= 32
    assert raw.object("encoding", active) == b"skiplist"
    assert sorted(raw.zrange(active, 0, -1)) == sorted(x.id.encode() for x in got)
    assert [x.id for x in got] == ids[47:80]
    assert_consistent(raw, queue.name)


def test_complete_is_fenced_and_keeps_the_row(queue: Queue, raw: redis.Redis) -> None:
    a = jid()
    queue.enqueue(a, b"x")
    (lease,) = queue.claim(lease_ms=5000)
    stale = lease.__class__(**{**{f: getattr(lease, f) for f in lease.__slots__}, "attempt": 7})
    assert queue.complete(stale) is Completion.STALE
    assert raw.hget(f"emq:{{{queue.name}}}:job:{a}", "state") == b"active"
    assert queue.complete(lease, b"ok") is Completion.COMPLETED
    assert queue.complete(lease) is Completion.STALE
    assert queue.heartbeat(lease, lease_ms=5000) is None
    assert raw.hget(f"emq:{{{queue.name}}}:job:{a}", "result") == b"ok"
    assert queue.enqueue(a, b"again") is Verdict.DUPLICATE  # retention refuses it
    assert assert_consistent(raw, queue.name) == {a: "done"}


def test_keep_zero_deletes_at_completion(conn: Connector, qname: str,
                                               raw: redis.Redis) -> None:
    q = Queue(conn, qname, options=QueueOptions(keep_done_ms=0))
    a = jid()
    q.enqueue(a, b"x")
    (lease,) = q.claim(lease_ms=5000)
    assert q.complete(lease) is Completion.COMPLETED
    assert assert_consistent(raw, qname) == {}
    assert raw.exists(f"emq:{{{qname}}}:active") == 0


def test_retention_trims_old_done_rows(conn: Connector, qname: str,
                                             raw: redis.Redis) -> None:
    q = Queue(conn, qname, options=QueueOptions(keep_done_ms=50))
    a, b = jid(), jid()
    q.enqueue_many([(a, b""), (b, b"")])
    for lease in q.claim(2, lease_ms=5000):
        q.complete(lease)
    trimmed = 0

    def both_trimmed() -> bool:  # each row leaves once its own window has passed
        nonlocal trimmed
        trimmed += q.trim()
        return trimmed >= 2

    wait_for(both_trimmed)
    assert trimmed == 2
    assert assert_consistent(raw, qname) == {}
    assert q.enqueue(a, b"") is Verdict.ENQUEUED  # after the window the id is free


def test_heartbeat_extends_only_the_current_attempt(queue: Queue) -> None:
    queue.enqueue(jid(), b"x")
    (lease,) = queue.claim(lease_ms=1000)
    later = queue.heartbeat(lease, lease_ms=60_000)
    assert later is not None and later > lease.deadline_ms
    older = lease.__class__(**{**{f: getattr(lease, f) for f in lease.__slots__}, "attempt": 0})
    assert queue.heartbeat(older, lease_ms=60_000) is None


def test_retry_backoff_then_dead_with_last_error(conn: Connector, qname: str,
                                                       raw: redis.Redis) -> None:
    q = Queue(conn, qname, options=QueueOptions(max_attempts=2))
    a = jid()
    q.enqueue(a, b"x")
    (first,) = q.claim(lease_ms=5000)
    assert q.retry(first, delay_ms=60_000, error="boom 1") is RetryOutcome.SCHEDULED
    assert assert_consistent(raw, qname) == {a: "delayed"}
    assert q.retry(first, delay_ms=0, error="late") is RetryOutcome.STALE
    raw.zadd(f"emq:{{{qname}}}:delayed", {a: 0})  # make it due now
    assert q.promote() == 1
    (second,) = q.claim(lease_ms=5000)
    assert second.attempt == 2
    assert q.retry(second, delay_ms=0, error="boom 2") is RetryOutcome.DEAD
    row = raw.hgetall(f"emq:{{{qname}}}:job:{a}")
    assert row[b"error"] == b"boom 2" and row[b"failures"] == b"2" and row[b"state"] == b"dead"
    assert assert_consistent(raw, qname) == {a: "dead"}
    assert q.requeue_dead() == 1
    (third,) = q.claim(lease_ms=5000)
    assert third.attempt == 3  # the fencing token never goes back
    assert q.complete(third) is Completion.COMPLETED


def test_defer_counts_no_failure(conn: Connector, qname: str, raw: redis.Redis) -> None:
    q = Queue(conn, qname, options=QueueOptions(max_attempts=1))
    a = jid()
    q.enqueue(a, b"x")
    for _ in range(3):
        (lease,) = q.claim(lease_ms=5000)
        assert q.defer(lease, delay_ms=0) is RetryOutcome.SCHEDULED
    assert raw.hget(f"emq:{{{qname}}}:job:{a}", "failures") is None
    assert assert_consistent(raw, qname) == {a: "pending"}


def test_delayed_admission_waits_for_the_server_clock(queue: Queue,
                                                            raw: redis.Redis) -> None:
    a, b = jid(), jid()
    assert queue.admit(a, b"later", delay_ms=300) is Verdict.ENQUEUED
    assert queue.admit(b, b"much later", delay_ms=600_000) is Verdict.ENQUEUED
    assert queue.claim(lease_ms=5000) == []
    assert queue.promote() == 0
    assert wait_for(queue.promote) == 1
    (lease,) = queue.claim(lease_ms=5000)
    assert lease.id == a
    assert assert_consistent(raw, queue.name) == {a: "active", b: "delayed"}


def test_reap_reexposes_an_expired_lease(conn: Connector, qname: str,
                                               raw: redis.Redis) -> None:
    q = Queue(conn, qname, options=QueueOptions(max_attempts=2))
    a = jid()
    q.enqueue(a, b"x")
    (lost,) = q.claim(lease_ms=50)
    assert wait_for(lambda: _reaped(q)) == (1, 0)
    (again,) = q.claim(lease_ms=50)
    assert again.attempt == 2
    assert q.complete(lost) is Completion.STALE  # the expired worker cannot finish
    assert wait_for(lambda: _reaped(q, dead=True)) == (0, 1)
    assert raw.hget(f"emq:{{{qname}}}:job:{a}", "error") == b"lease expired"
    assert assert_consistent(raw, qname) == {a: "dead"}
    assert q.purge_dead() == 1
    assert assert_consistent(raw, qname) == {}


def _reaped(q: Queue, dead: bool = False) -> tuple[int, int] | None:
    got = q.reap()
    return got if got[1 if dead else 0] else None


def test_browse_stats_and_sizes(queue: Queue, raw: redis.Redis) -> None:
    ids = [jid() for _ in range(5)]
    queue.enqueue_many([(i, b"p" + i.encode()) for i in ids])
    (lease,) = queue.claim(lease_ms=5000)
    queue.complete(lease)
    stats = queue.stats()
    assert (stats.pending, stats.active, stats.done, stats.total) == (4, 0, 1, 5)
    assert queue.pending_size() == 4
    page = queue.browse("pending", offset=1, limit=2)
    assert [v.id for v in page] == ids[2:4]
    assert page[0].state == "pending" and page[0].row["payload"] == b"p" + ids[2].encode()
    assert [v.id for v in queue.browse("done")] == ids[:1]
    with pytest.raises(ValueError, match="state"):
        queue.browse("nope")


def test_invalid_arguments_write_nothing(queue: Queue, raw: redis.Redis) -> None:
    with pytest.raises(ValueError, match="delay_ms"):
        queue.admit(jid(), b"x", delay_ms=-1)
    with pytest.raises(ValueError, match="count"):
        queue.claim(0, lease_ms=10)
    # and the server-side checks hold even for a client that skips ours
    from echomq import InvalidArgument
    from echomq.protocol.scripts import load

    k, job = queue.keys, jid()
    with pytest.raises(InvalidArgument, match="EMQARG"):
        queue.connector.eval(
            load("admit"),
            [queue.job_key(job), k["pending"], k["delayed"], k["lanes"], k["meta"], k["wake"],
             k["expiring"]],
            [job, b"x", "", "-5", "0", "", "0", "", "", ""],
        )
    assert assert_consistent(raw, queue.name) == {}
