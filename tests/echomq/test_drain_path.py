"""The drain path (docs/decisions/0008-drain-path.md): settle, complete_batch, the
consumer's batched claims and its handler threads. Each keeps the guarantees of the
one-call-per-job path: per-job verdicts, the fence, declared keys, server time."""

from __future__ import annotations

import asyncio
import threading

import redis

from echomq import AsyncQueue, Completion, Lease, QueueOptions, generate
from echomq.runtime.consumer import Consumer, ConsumerOptions
from tests.echomq._async.support import wait_for
from tests.echomq.invariants import assert_consistent
from tests.echomq.test_consumer import _true, subscribed


def jid() -> str:
    return generate("JOB")


async def _fill(queue: AsyncQueue, n: int) -> list[str]:
    ids = [jid() for _ in range(n)]
    await queue.enqueue_many([(i, b"p" + i.encode()) for i in ids])
    return ids


async def test_settle_peeks_then_claims_in_admission_order(queue: AsyncQueue) -> None:
    ids = await _fill(queue, 10)
    done, leases, cands = await queue.settle([], count=0, lease_ms=5000, candidates=[], window=4)
    assert (done, leases) == ([], [])
    assert [c.decode() for c in cands] == ids[:4]
    done, leases, cands = await queue.settle([], count=3, lease_ms=5000, candidates=cands, window=4)
    assert [x.id for x in leases] == ids[:3]
    assert all(x.attempt == 1 and x.payload == b"p" + x.id.encode() for x in leases)
    # The peek ran after the claim: the next candidates start after what was leased.
    assert [c.decode() for c in cands] == ids[3:7]


async def test_settle_completes_claims_and_peeks_in_one_flush(queue: AsyncQueue,
                                                             raw: redis.Redis) -> None:
    ids = await _fill(queue, 6)
    cands: list[bytes] = [i.encode() for i in ids]
    _, first, cands = await queue.settle([], count=2, lease_ms=5000, candidates=cands, window=10)
    done, second, cands = await queue.settle(
        [(first[0], b"r"), (first[1], b"")], count=2, lease_ms=5000, candidates=cands, window=10)
    assert done == [Completion.COMPLETED, Completion.COMPLETED]
    assert [x.id for x in second] == ids[2:4]
    assert [c.decode() for c in cands] == ids[4:]
    assert (await queue.job(ids[0]) or {})["result"] == b"r"
    states = assert_consistent(raw, queue.name)
    assert [states[i] for i in ids] == ["done", "done", "active", "active", "pending", "pending"]


async def test_stale_candidates_are_skipped_not_claimed_twice(queue: AsyncQueue) -> None:
    ids = await _fill(queue, 4)
    cands = [i.encode() for i in ids]
    (taken,) = await queue.claim(1, lease_ms=5000)  # another consumer takes the head
    _, leases, _ = await queue.settle([], count=4, lease_ms=5000, candidates=cands, window=0)
    assert taken.id == ids[0]
    assert [x.id for x in leases] == ids[1:]


async def test_complete_batch_verdicts_are_per_attempt_and_fenced(queue: AsyncQueue) -> None:
    await _fill(queue, 3)
    a, b, c = await queue.claim(3, lease_ms=5000)
    old_b = Lease(queue=b.queue, id=b.id, attempt=b.attempt + 1, payload=b"", lane=None,
                  deadline_ms=b.deadline_ms)  # a wrong token: refused, nothing changes
    got = await queue.complete_many([a, old_b, c, a])
    assert got == [Completion.COMPLETED, Completion.STALE, Completion.COMPLETED, Completion.STALE]
    assert await queue.complete(b) is Completion.COMPLETED
    assert (await queue.stats()).done == 3


async def test_complete_batch_refuses_an_expired_lease(queue: AsyncQueue) -> None:
    await _fill(queue, 2)
    short, = await queue.claim(1, lease_ms=30)
    live, = await queue.claim(1, lease_ms=5000)
    async def expired() -> bool:  # on the server's clock
        return bool(await queue.connector.server_time_ms() > short.deadline_ms)

    await wait_for(expired)
    assert await queue.complete_many([short, live]) == [Completion.STALE, Completion.COMPLETED]


async def test_complete_many_spans_several_script_calls(conn, qname: str,  # type: ignore[no-untyped-def]
                                                        raw: redis.Redis) -> None:
    queue = AsyncQueue(conn, qname, options=QueueOptions(keep_done_ms=0))
    await _fill(queue, 600)  # more than one complete_batch call (256 each)
    leases = await queue.claim(600, lease_ms=30_000, window=600)
    assert len(leases) == 600
    assert set(await queue.complete_many(leases)) == {Completion.COMPLETED}
    assert (await queue.stats()).done == 0  # keep_ms 0: rows deleted at once
    assert assert_consistent(raw, qname) == {}


async def test_complete_batch_survives_script_flush(queue: AsyncQueue, raw: redis.Redis) -> None:
    await _fill(queue, 3)
    leases = await queue.claim(3, lease_ms=5000)
    raw.script_flush()
    done, more, _ = await queue.settle([(x, b"") for x in leases], count=0, lease_ms=5000,
                                       candidates=[], window=5)
    assert done == [Completion.COMPLETED] * 3 and more == []


async def test_consumer_claims_in_batches(queue: AsyncQueue, raw: redis.Redis) -> None:
    await _fill(queue, 400)
    claims: list[int] = []
    settle = queue.settle
    flying, most_flying = 0, 0

    async def spy(*a, **kw):  # type: ignore[no-untyped-def]
        nonlocal flying, most_flying
        flying += 1
        most_flying = max(most_flying, flying)
        try:
            out = await settle(*a, **kw)
        finally:
            flying -= 1
        if out[1]:
            claims.append(len(out[1]))
        return out

    queue.settle = spy  # type: ignore[method-assign]

    running, most = 0, 0

    async def handler(lease: Lease) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0)  # overlap with the other handlers started in this turn
        running -= 1

    consumer = Consumer(queue, handler, options=ConsumerOptions(concurrency=32))
    task = asyncio.create_task(consumer.run())
    try:
        await wait_for(lambda: _done(queue, 400))
    finally:
        consumer.stop()
        await asyncio.wait_for(task, 10)
    assert consumer.stats.completed == 400 and consumer.stats.stale == 0
    # A deep backlog: the consumer leases up to concurrency more ahead of the running
    # handlers (decision 0025) in a second flush sent before the first is answered
    # (decision 0052): two flushes in flight, each claiming up to concurrency, and still
    # never more than 32 handlers run at once.
    assert max(claims) == 32 and sum(claims) == 400 and most == 32
    assert most_flying == 2
    assert len(claims) <= 400 // 16  # not one job per claim
    assert set(assert_consistent(raw, queue.name).values()) == {"done"}


async def test_sync_handlers_run_on_one_thread_per_slot(queue: AsyncQueue) -> None:
    await _fill(queue, 12)
    gate = threading.Barrier(12, timeout=5)  # passes only if 12 handlers block at once
    names: set[str] = set()

    def handler(lease: Lease) -> None:
        names.add(threading.current_thread().name)
        gate.wait()

    consumer = Consumer(queue, handler, options=ConsumerOptions(concurrency=12))
    task = asyncio.create_task(consumer.run())
    try:
        await wait_for(lambda: _done(queue, 12))
    finally:
        consumer.stop()
        await asyncio.wait_for(task, 10)
    assert consumer.stats.completed == 12 and len(names) == 12


async def _done(queue: AsyncQueue, n: int) -> bool:
    return (await queue.stats()).done == n


async def test_wake_message_carries_the_id_and_the_woken_claim_needs_no_peek(
        queue: AsyncQueue) -> None:
    sub = await queue.connector.wake_subscription(queue.keys["wake"])
    try:
        a, b = jid(), jid()
        await queue.enqueue(a, b"")
        await queue.enqueue(b, b"")  # pending was not empty: no message
        msg = None
        for _ in range(50):
            msg = await sub.get_message(ignore_subscribe_messages=True, timeout=0.1)
            if msg is not None:
                break
        assert msg is not None and msg["data"] == a.encode()
        assert await sub.get_message(ignore_subscribe_messages=True, timeout=0.2) is None
    finally:
        await sub.aclose()
    # The hint is only a candidate: the claim re-checks it on the server.
    _, leases, cands = await queue.settle([], count=5, lease_ms=5000, candidates=[a.encode()],
                                          window=5)
    assert [x.id for x in leases] == [a] and cands == [b.encode()]


async def test_an_idle_consumer_starts_a_new_job_after_one_flush(queue: AsyncQueue,
                                                                raw: redis.Redis) -> None:
    flushes: list[int] = []
    settle = queue.settle

    async def spy(*a, **kw):  # type: ignore[no-untyped-def]
        out = await settle(*a, **kw)
        flushes.append(len(out[1]))
        return out

    queue.settle = spy  # type: ignore[method-assign]
    started = asyncio.Event()

    async def handler(lease: Lease) -> None:
        started.set()

    # Without hand-off (decision 0018; tests/echomq/test_handoff.py covers it) the wake
    # message's id is what spares the peek.
    consumer = Consumer(queue, handler, options=ConsumerOptions(beat_ms=5000, lease_ms=20_000,
                                                                handoff=False))
    task = asyncio.create_task(consumer.run())
    try:
        await wait_for(lambda: _true(bool(flushes)))  # idle: the first poll found pending empty
        await wait_for(lambda: subscribed(raw, queue.keys["wake"]))  # and it listens
        flushes.clear()
        await queue.enqueue(jid(), b"")
        await asyncio.wait_for(started.wait(), 2)
        assert flushes[0] == 1  # the wake-up's id was claimed in the first flush, no peek first
    finally:
        consumer.stop()
        await asyncio.wait_for(task, 10)


async def test_async_leases_taken_ahead_wait_for_a_slot_and_go_back_at_stop(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    ids = await _fill(queue, 60)
    release = asyncio.Event()
    ran: list[str] = []

    async def handler(lease: Lease) -> None:
        ran.append(lease.id)
        await release.wait()

    consumer = Consumer(queue, handler, options=ConsumerOptions(concurrency=2, beat_ms=20,
                                                                 lease_ms=30_000, grace_s=10))
    task = asyncio.create_task(consumer.run())
    await wait_for(lambda: _true(consumer.in_flight == 4 and len(ran) == 2))  # 2 run, 2 wait
    await asyncio.sleep(0.1)  # beats pass: the two ahead stay leased, still not started
    assert len(ran) == 2 and (await queue.stats()).active == 4
    consumer.stop()
    await wait_for(lambda: _active_is(queue, 2))  # the two ahead: back at once, never run
    assert not task.done() and len(ran) == 2
    release.set()
    await asyncio.wait_for(task, 10)
    s = consumer.stats
    assert (s.completed, s.handed_back, s.stale, len(ran)) == (2, 2, 0, 2)
    where = assert_consistent(raw, queue.name)
    assert sorted(i for i, st in where.items() if st == "done") == sorted(ran)
    assert all(where[i] == "pending" for i in ids if i not in ran)


async def _active_is(queue: AsyncQueue, n: int) -> bool:
    return (await queue.stats()).active == n
