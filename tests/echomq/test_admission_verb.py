"""One admission verb: ``admit``; ``enqueue``, ``enqueue_many`` and ``lanes.enqueue`` are
the protocol's names for the same calls, with the same defaults (``serial=False``)."""

from __future__ import annotations

import redis

from echomq import AsyncQueue, InvalidArgument, InvalidJobId, Verdict, generate
from echomq.client import lanes
from tests.echomq.invariants import assert_consistent


def jid() -> str:
    return generate("JOB")


def _row(raw: redis.Redis, queue: AsyncQueue, job_id: str) -> dict[bytes, bytes]:
    # Without the admitting call's token ('tok', 16 characters: docs/protocol.md).
    row: dict[bytes, bytes] = raw.hgetall(queue.job_key(job_id))  # type: ignore[assignment]
    assert len(row.pop(b"tok", b"0123456789abcdef")) == 16
    return row


async def test_enqueue_writes_what_admit_without_options_writes(queue: AsyncQueue,
                                                                raw: redis.Redis) -> None:
    a, b = jid(), jid()
    assert await queue.enqueue(a, b"x") is Verdict.ENQUEUED
    assert await queue.admit(b, b"x") is Verdict.ENQUEUED
    assert _row(raw, queue, a) == _row(raw, queue, b) == {
        b"state": b"pending", b"attempts": b"0", b"payload": b"x"}
    pending = dict(raw.zrange(queue.keys["pending"], 0, -1, withscores=True))
    assert pending == {a.encode(): 0.0, b.encode(): 0.0}
    assert await queue.enqueue(b, b"y") is Verdict.DUPLICATE  # each door sees the other's row
    assert await queue.admit(a, b"y") is Verdict.DUPLICATE
    assert_consistent(raw, queue.name)


async def test_serial_is_false_by_default_through_every_door(queue: AsyncQueue,
                                                             raw: redis.Redis) -> None:
    one, many, seed = jid(), jid(), jid()
    assert await queue.admit(one, b"", lane="L") is Verdict.ENQUEUED
    assert await queue.admit_many([(many, b"", "L")]) == [Verdict.ENQUEUED]
    assert await lanes.enqueue(queue.connector, queue.name, "L", seed, b"") is Verdict.ENQUEUED
    for job_id in (one, many, seed):
        assert _row(raw, queue, job_id)[b"serial"] == b"0"
    leases = await queue.claim(10, lease_ms=60_000)
    assert sorted(x.id for x in leases) == sorted([one, many, seed])  # not held to one
    assert_consistent(raw, queue.name)


async def test_serial_true_holds_the_lane_through_every_door(queue: AsyncQueue,
                                                             raw: redis.Redis) -> None:
    one, many, seed = jid(), jid(), jid()
    await queue.admit(one, b"", lane="S", serial=True)
    await queue.admit_many([(many, b"", "S")], serial=True)
    await lanes.enqueue(queue.connector, queue.name, "S", seed, b"", serial=True)
    for job_id in (one, many, seed):
        assert _row(raw, queue, job_id)[b"serial"] == b"1"
    assert [x.id for x in await queue.claim(10, lease_ms=60_000)] == [one]


async def test_admit_many_takes_pairs_and_triples_and_enqueue_many_is_the_same_call(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    a, b, c, d = jid(), jid(), jid(), jid()
    got = await queue.admit_many([(a, b"1"), (b, b"2", "L"), ("nope", b"3"), (c, b"4", None),
                                  (a, b"5"), (d,)])  # type: ignore[list-item]
    assert got[0] is Verdict.ENQUEUED and got[1] is Verdict.ENQUEUED
    assert isinstance(got[2], InvalidJobId)
    assert got[3] is Verdict.ENQUEUED and got[4] is Verdict.DUPLICATE
    assert isinstance(got[5], InvalidArgument) and "item 5" in str(got[5])
    assert _row(raw, queue, b)[b"lane"] == b"L" and b"lane" not in _row(raw, queue, c)
    e = jid()
    assert await queue.enqueue_many([(e, b"6"), (b, b"7", "L")]) == [
        Verdict.ENQUEUED, Verdict.DUPLICATE]
    assert await queue.pending_size() == 4
    assert_consistent(raw, queue.name)
