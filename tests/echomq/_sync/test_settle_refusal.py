# Generated from tests/echomq/_async/test_settle_refusal.py by scripts/unasync_gen.py. Do not edit.
"""A drain flush whose completions are refused while its claim is not: the claimed jobs
are given back at once, not left leased to a caller that never sees the leases."""

from __future__ import annotations

import pytest
import redis

from echomq import EchoMQError, Queue, generate
from tests.echomq.invariants import assert_consistent


def test_a_refused_completion_gives_the_flush_s_claims_back(queue: Queue,
                                                                  raw: redis.Redis) -> None:
    ids = [generate("JOB") for _ in range(3)]
    queue.enqueue_many([(i, b"p") for i in ids])
    (held,) = queue.claim(1, lease_ms=60_000)
    # A foreign client overwrote the held job's row with a string: its completion batch
    # answers WRONGTYPE (the one write-last exception, docs/protocol.md), the claim does not.
    raw.delete(queue.job_key(held.id))
    raw.set(queue.job_key(held.id), "foreign")
    rest = [i.encode() for i in ids if i != held.id]
    with pytest.raises(EchoMQError):
        queue.settle([(held, b"r")], count=2, lease_ms=60_000, candidates=rest, window=0)
    raw.delete(queue.job_key(held.id))
    raw.zrem(queue.keys["active"], held.id)
    raw.hdel(queue.keys["inflight"], held.id)  # (no lane: nothing held there)
    # The two jobs the flush claimed are pending again, at once, with no failure counted.
    states = assert_consistent(raw, queue.name)
    assert [states[i] for i in ids if i != held.id] == ["pending", "pending"]
    again = queue.claim(2, lease_ms=60_000)
    assert sorted(x.id for x in again) == sorted(i for i in ids if i != held.id)
    for lease in again:
        row = queue.job(lease.id) or {}
        assert int(row.get("failures", b"0")) == 0 and lease.attempt == 2, row
