# Generated from tests/echomq/_async/test_heartbeat_batch.py by scripts/unasync_gen.py. Do not edit.
"""A consumer's beat in one script call (``heartbeat_batch``, decision 0055), on both
topologies and both APIs (written once for asyncio; the blocking copy is generated).

* Each lease of a batch is answered exactly as ``heartbeat`` answers it alone: a live lease
  is extended (the reply's sign says a cancel was asked for); an expired one, an older
  attempt of a re-claimed job and a finished one are lost (None) and nothing of theirs moves.
* A malformed element (its job key not its id's, a bad ``lease_ms``, a missing attempt)
  refuses the whole call, typed, with nothing written.
* A call carries at most ``MAX_BEATS`` (256) leases: the script refuses more, and
  ``heartbeat_many`` sends as many calls as it takes.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis

from echomq import Completion, InvalidArgument, Lease, Queue, ScriptContractError, generate
from echomq import protocol as p
from echomq.protocol import Call
from echomq.protocol.scripts import load
from tests.echomq.invariants import assert_consistent


def _raw_call(q: Queue, pairs: list[tuple[str, Any]], lease_ms: Any = 60_000,
              keys: list[str] | None = None) -> Call:
    """A heartbeat_batch call built by hand (the builder refuses what these tests send)."""
    job_keys = keys if keys is not None else [q.k.job_prefix + i for i, _ in pairs]
    args: list[Any] = [lease_ms]
    for jid, attempt in pairs:
        args += [jid, attempt]
    return Call(load("heartbeat_batch"), [q.k.active, q.k.meta, *job_keys], args)


def _leases_on_active(raw: redis.Redis, q: Queue) -> list[tuple[bytes, float]]:
    return list(raw.zrange(q.keys["active"], 0, -1, withscores=True))


def _past(queue: Queue, deadline_ms: int) -> None:
    """Until the server's clock is past ``deadline_ms`` (a 1 ms lease runs out at once)."""
    for _ in range(10_000):
        if queue.connector.server_time_ms() > deadline_ms:
            return
    raise AssertionError("the server's clock never passed the deadline")


def test_a_mixed_batch_gets_what_heartbeat_gives_each_lease(
        queue: Queue, raw: redis.Redis) -> None:
    for _ in range(5):
        queue.enqueue(generate("JOB"), b"p")
    expired, old = queue.claim(2, lease_ms=1)
    _past(queue, max(expired.deadline_ms, old.deadline_ms))
    # the older attempt's job is reaped and claimed again: its lease is another attempt's now
    reaped = p.decode_reap(queue.connector.run(p.reap(queue.k, [old.id], max_attempts=5)))
    assert tuple(reaped) == (1, 0)
    fresh = {x.id: x for x in queue.claim(4, lease_ms=60_000)}
    new = fresh.pop(old.id)
    assert new.attempt == old.attempt + 1
    live, asked, done = fresh.values()
    queue.cancel([asked.id])  # a running job is asked to stop
    assert queue.complete(done) is Completion.COMPLETED
    expired_at = raw.zscore(queue.keys["active"], expired.id)

    batch = [live, expired, old, done, asked, new, live]  # a lease given twice, too
    t0 = queue.connector.server_time_ms()
    got = queue.heartbeat_many(batch, lease_ms=30_000)
    t1 = queue.connector.server_time_ms()

    assert [None if d is None else d.cancel for d in got] == [False, None, None, None, True, False, False]
    for lease, d in zip(batch, got, strict=True):
        if d is not None:
            assert t0 + 30_000 <= d <= t1 + 30_000
            assert raw.zscore(queue.keys["active"], lease.id) == d  # the deadline it was told
    # the expired lease is not extended (and not reaped either): still active, its deadline kept
    assert raw.zscore(queue.keys["active"], expired.id) == expired_at
    assert raw.hget(queue.job_key(expired.id), "state") == b"active"
    # heartbeat alone says the same of each (it extends the live ones again)
    alone = [queue.heartbeat(x, lease_ms=30_000) for x in batch]
    assert [None if d is None else d.cancel for d in alone] == [None if d is None else d.cancel
                                                                  for d in got]
    assert_consistent(raw, queue.name)


def test_a_malformed_element_refuses_the_whole_batch(queue: Queue, raw: redis.Redis) -> None:
    for _ in range(3):
        queue.enqueue(generate("JOB"), b"p")
    leases = queue.claim(3, lease_ms=60_000)
    good = [(x.id, x.attempt) for x in leases]
    before = _leases_on_active(raw, queue)
    a, b, c = (x.id for x in leases)
    refusals: list[tuple[Call, type[Exception]]] = [
        (_raw_call(queue, good, lease_ms=lease_ms), InvalidArgument)
        for lease_ms in (0, -5, 86_400_001, "1.5", "x", "")]
    refusals += [
        # the second element's job key is another job's: EMQKEYS, the first not extended
        (_raw_call(queue, good, keys=[queue.k.job(a), queue.k.job(c), queue.k.job(c)]),
         ScriptContractError),
        (_raw_call(queue, good, keys=[queue.k.job(a), queue.k.job(b)]), ScriptContractError),
        (Call(load("heartbeat_batch"), [queue.k.active, queue.k.meta, queue.k.job(a)], [60_000, a]),
         ScriptContractError),  # an id without its attempt
        (Call(load("heartbeat_batch"), [queue.k.active, queue.k.meta], [60_000]), InvalidArgument),
    ]
    for call, error in refusals:
        with pytest.raises(error):
            queue.connector.run(call)
        assert _leases_on_active(raw, queue) == before, call.args
    # the client refuses a bad lease before any I/O, whatever its place in the batch
    with pytest.raises(InvalidArgument):
        queue.heartbeat_many([leases[0], Lease(queue="other", id=a, attempt=1, payload=b"",
                                                     lane=None, deadline_ms=0)], lease_ms=30_000)
    with pytest.raises(InvalidArgument):
        p.heartbeat_batch(queue.k, [], lease_ms=1)
    assert _leases_on_active(raw, queue) == before
    assert queue.heartbeat_many([], lease_ms=30_000) == []
    assert None not in queue.heartbeat_many(leases, lease_ms=30_000)


def test_a_call_carries_at_most_max_beats_leases(queue: Queue, raw: redis.Redis) -> None:
    n = p.MAX_BEATS + 1
    queue.enqueue_many([(generate("JOB"), b"p") for _ in range(n)])
    leases = queue.claim(n, lease_ms=60_000)
    assert len(leases) == n
    before = _leases_on_active(raw, queue)
    with pytest.raises(InvalidArgument):
        p.heartbeat_batch(queue.k, leases, lease_ms=30_000)  # the builder refuses first
    with pytest.raises(InvalidArgument, match="EMQARG"):
        queue.connector.run(_raw_call(queue, [(x.id, x.attempt) for x in leases]))
    assert _leases_on_active(raw, queue) == before  # refused whole
    t0 = queue.connector.server_time_ms()
    got = queue.heartbeat_many(leases, lease_ms=600_000)  # two calls, one flush
    assert len(got) == n and all(d is not None and d >= t0 + 600_000 for d in got)
    assert all(score >= t0 + 600_000 for _, score in _leases_on_active(raw, queue))
