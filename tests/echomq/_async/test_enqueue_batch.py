"""Batch admission (enqueue_batch.lua, docs/decisions/0027-batch-admission.md): many plain
jobs per call, each with enqueue.lua's verdict, row and hand-off. On both topologies (the
root conftest runs each test on the single server and on the local cluster)."""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis

from echomq import PROTOCOL, AsyncQueue, InvalidJobId, ProtocolVersionError, RateLimit, Verdict, generate
from echomq import protocol as p
from echomq.core.errors import ScriptContractError
from echomq.protocol.handoff import decode_handoff
from tests.conftest import keys_of


def jid() -> str:
    return generate("JOB")


class Recording:
    """The queue's connector, recording the script of every call it is given."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.scripts: list[str] = []

    async def pipeline(self, calls: Any, **kw: Any) -> list[Any]:
        self.scripts += [c.script.name for c in calls]
        return await self.inner.pipeline(calls, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def row(raw: redis.Redis, q: AsyncQueue, job: str) -> dict[bytes, bytes]:
    # Without the admitting call's token ('tok', 16 characters: docs/protocol.md).
    row: dict[bytes, bytes] = raw.hgetall(q.job_key(job))  # type: ignore[assignment]
    assert len(row.pop(b"tok", b"0123456789abcdef")) == 16
    return row


async def wake_messages(q: AsyncQueue, raw: redis.Redis, sub: Any) -> list[bytes]:
    """Every message on the wake channel up to a marker published now (same channel and
    node: the messages before it are all the ones sent before it)."""
    raw.execute_command("SPUBLISH", q.keys["wake"], "marker")
    got: list[bytes] = []
    give_up = time.monotonic() + 10
    while time.monotonic() < give_up:
        msg = await sub.get_message(ignore_subscribe_messages=True, timeout=1.0)
        if msg and msg["data"] == b"marker":
            return got
        if msg:
            got.append(msg["data"])
    raise AssertionError("the marker never came")


async def test_runs_of_plain_jobs_go_as_batch_calls_verdicts_in_input_order(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    rec = Recording(queue.connector)
    q = AsyncQueue(rec, queue.name)  # type: ignore[arg-type]
    old = jid()
    assert await q.enqueue(old, b"old") is Verdict.ENQUEUED
    a, b, c, lane = jid(), jid(), jid(), jid()
    items: list[Any] = [(a, b"a"), (old, b"new"), (b, b"b"), (a, b"again"), (generate("ORD"), b"k"),
                        (c, b"c"), ("JOB{bad}", b"x"), (lane, b"l", "L"), (b, b"b2"), (jid(), b"n", None)]
    verdicts = await q.admit_many(items)
    assert verdicts[:6] == [Verdict.ENQUEUED, Verdict.DUPLICATE, Verdict.ENQUEUED,
                            Verdict.DUPLICATE, Verdict.KIND, Verdict.ENQUEUED]
    assert isinstance(verdicts[6], InvalidJobId)
    assert verdicts[7:] == [Verdict.ENQUEUED, Verdict.DUPLICATE, Verdict.ENQUEUED]
    # plain runs are batch calls; the wrong kind (enqueue.lua: KIND) and the lane (admit.lua)
    # are calls of their own, in place; the malformed id is refused before any I/O
    assert rec.scripts == ["enqueue_batch", "enqueue", "enqueue_batch", "admit", "enqueue_batch"]
    assert row(raw, queue, a) == {b"state": b"pending", b"attempts": b"0", b"payload": b"a"}
    assert row(raw, queue, old)[b"payload"] == b"old" and row(raw, queue, b)[b"payload"] == b"b"
    assert raw.zcard(queue.keys["pending"]) == 6


async def test_a_long_list_is_cut_into_batches_and_each_job_gets_its_verdict(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    rec = Recording(queue.connector)
    q = AsyncQueue(rec, queue.name)  # type: ignore[arg-type]
    ids = [jid() for _ in range(1200)]
    assert await q.enqueue(ids[700], b"first") is Verdict.ENQUEUED
    items = [(i, i.encode()) for i in ids]
    items[1100] = (ids[5], b"repeat")  # repeated in a later batch of the same list
    verdicts = await q.enqueue_many(items)
    expect = [Verdict.ENQUEUED] * 1200
    expect[700] = expect[1100] = Verdict.DUPLICATE
    assert verdicts == expect
    assert rec.scripts == ["enqueue_batch"] * 5  # 256 a call (encoded.BATCH)
    assert raw.zcard(queue.keys["pending"]) == 1199
    assert row(raw, queue, ids[5])[b"payload"] == ids[5].encode()
    assert row(raw, queue, ids[700])[b"payload"] == b"first"


async def test_one_call_slices_pending_and_finds_duplicates_across_slices(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    ids = [jid() for _ in range(1100)]
    assert await queue.enqueue(ids[900], b"old") is Verdict.ENQUEUED
    payloads = [i.encode() for i in ids]
    ids[1050] = ids[3]  # a slice of 512 later than its first sight
    ids[10] = ids[9]  # inside one slice
    reply = await queue.connector.run(p.enqueue_batch(queue.k, ids, payloads))
    expect = ["1"] * 1100
    expect[900] = expect[1050] = expect[10] = "0"
    assert reply == "".join(expect).encode()
    assert raw.zcard(queue.keys["pending"]) == 1098
    assert raw.zrange(queue.keys["pending"], 0, 0, withscores=True)[0][1] == 0.0
    assert row(raw, queue, ids[3])[b"payload"] == payloads[3]
    assert row(raw, queue, ids[9])[b"payload"] == payloads[9]
    assert row(raw, queue, ids[900])[b"payload"] == b"old"


@pytest.mark.parametrize("at", [0, 4, 9])
@pytest.mark.parametrize("bad", ["kind", "queue", "count"])
async def test_one_bad_job_key_refuses_the_whole_call_before_any_write(
        queue: AsyncQueue, raw: redis.Redis, at: int, bad: str) -> None:
    ids = [jid() for _ in range(10)]
    call = p.enqueue_batch(queue.k, ids, [b"x"] * 10)
    keys, args = list(call.keys), list(call.args)
    if bad == "kind":
        keys[6 + at] = queue.job_key(generate("ORD"))
    elif bad == "queue":  # same slot, not a job key of the queue
        keys[6 + at] = f"emq:{{{queue.name}}}:jab:{ids[at]}"
    else:
        args = args[:-1]
    error = InvalidJobId if bad == "kind" else ScriptContractError
    with pytest.raises(error, match="EMQKIND" if bad == "kind" else "EMQKEYS"):
        await queue.connector.eval(call.script, keys, args)
    assert keys_of(raw, queue.name) == set()  # not even the protocol version


async def test_the_version_fence_refuses_the_batch_and_writes_nothing(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    raw.hset(queue.keys["meta"], "protocol", "echomq:2.0.0")
    verdicts = await queue.enqueue_many([(jid(), b"x") for _ in range(5)])
    assert all(isinstance(v, ProtocolVersionError) for v in verdicts)
    assert keys_of(raw, queue.name) == {queue.keys["meta"]}
    raw.delete(queue.keys["meta"])
    assert await queue.enqueue_many([(jid(), b"x")]) == [Verdict.ENQUEUED]
    assert raw.hget(queue.keys["meta"], "protocol") == PROTOCOL.encode()  # recorded once written


async def test_the_wake_channel_is_told_once_when_pending_stops_being_empty(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    sub = await queue.connector.wake_subscription(queue.keys["wake"])
    try:
        ids = [jid() for _ in range(700)]
        assert await queue.enqueue_many([(i, b"x") for i in ids]) == [Verdict.ENQUEUED] * 700
        assert await wake_messages(queue, raw, sub) == [ids[0].encode()]  # one, for 700 jobs
        assert await queue.enqueue_many([(jid(), b"y") for _ in range(300)]) == [Verdict.ENQUEUED] * 300
        assert await wake_messages(queue, raw, sub) == []  # pending was not empty: no wake
    finally:
        await sub.aclose()


async def test_parked_consumers_get_the_first_jobs_of_a_batch_the_rest_queue(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    sub = await queue.connector.wake_subscription(queue.keys["wake"])
    try:
        assert await queue.park("t1", lease_ms=30_000, ttl_ms=30_000)
        assert await queue.park("t2", lease_ms=30_000, ttl_ms=30_000)
        ids = [jid() for _ in range(6)]
        items = [(ids[0], b"p0"), (ids[0], b"again"), *((i, i.encode()) for i in ids[1:])]
        verdicts = await queue.enqueue_many(items)
        assert verdicts == [Verdict.ENQUEUED, Verdict.DUPLICATE] + [Verdict.ENQUEUED] * 5
        messages = await wake_messages(queue, raw, sub)
    finally:
        await sub.aclose()
    # one registration, one job: the first two new jobs are leased, in admission order
    leases = [decode_handoff(queue.name, t, m) for t, m in zip(("t1", "t2"), messages, strict=False)]
    assert [(x.id, x.attempt, x.payload) for x in leases if x] == [(ids[0], 1, b"p0"),
                                                                   (ids[1], 1, ids[1].encode())]
    assert messages[2:] == [ids[2].encode()]  # then pending stopped being empty: one wake
    for i in ids[:2]:
        assert row(raw, queue, i)[b"state"] == b"active" and row(raw, queue, i)[b"attempts"] == b"1"
    assert raw.zrange(queue.keys["active"], 0, -1) == [i.encode() for i in ids[:2]]
    assert raw.zrange(queue.keys["pending"], 0, -1) == [i.encode() for i in ids[2:]]
    assert not raw.exists(queue.keys["parked"])


async def test_the_claim_gate_holds_a_batch_hand_off(queue: AsyncQueue, raw: redis.Redis) -> None:
    # paused: nothing is handed off, the registration stays, every job waits in pending
    await queue.pause()
    assert await queue.park("t1", lease_ms=30_000, ttl_ms=30_000)
    ids = [jid() for _ in range(3)]
    assert await queue.enqueue_many([(i, b"x") for i in ids]) == [Verdict.ENQUEUED] * 3
    assert raw.zcard(queue.keys["active"]) == 0 and raw.zcard(queue.keys["parked"]) == 1
    assert raw.zrange(queue.keys["pending"], 0, -1) == [i.encode() for i in ids]
    # one lease a minute: of two parked consumers only the first gets a job
    other = AsyncQueue(queue.connector, queue.name + "r")
    await other.set_limits(rate=RateLimit(1, 60_000))
    assert await other.park("t1", lease_ms=30_000, ttl_ms=30_000)
    assert await other.park("t2", lease_ms=30_000, ttl_ms=30_000)
    more = [jid() for _ in range(3)]
    assert await other.enqueue_many([(i, b"y") for i in more]) == [Verdict.ENQUEUED] * 3
    assert raw.zrange(other.keys["active"], 0, -1) == [more[0].encode()]
    assert raw.llen(other.keys["rate"]) == 1
    assert raw.zrange(other.keys["pending"], 0, -1) == [i.encode() for i in more[1:]]
    assert raw.zcard(other.keys["parked"]) == 1  # t2 got nothing and is still parked
