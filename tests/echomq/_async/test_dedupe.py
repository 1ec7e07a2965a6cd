"""Dedupe windows, separate from retention (issue 28 item 2; docs/protocol.md "Dedupe
windows"), on both topologies and both APIs (written once for asyncio; the blocking copy
is generated).

* throttle: the first admission of a key in the window wins, whatever became of its row
  (a queue that keeps no finished rows still refuses the id for the window);
* debounce: a later admission replaces the payload of the waiting holder and moves its
  due time; a running holder is left alone and the new job waits for it on its serial
  lane (keep-last-if-active);
* bad input is a typed error before any write; a resend answers what its first send got.
"""

from __future__ import annotations

import pytest
import redis

from echomq import AsyncQueue, InvalidArgument, QueueOptions, Verdict
from echomq import protocol as p
from echomq.core.bounds import MAX_DEDUPE_KEY, MAX_DEDUPE_MS
from tests.conftest import keys_of
from tests.echomq._async.support import jid, wait_for
from tests.echomq.invariants import assert_consistent


async def test_throttle_refuses_the_key_for_its_window_then_admits(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    first, second, third = jid(), jid(), jid()
    w = {"dedupe_ms": 300, "dedupe_key": "order-42"}
    assert await queue.admit(first, b"1", **w) is Verdict.ENQUEUED
    assert await queue.admit(second, b"2", **w) is Verdict.DUPLICATE
    held = await queue.admission.admit_held(second, b"2", p.check_window(300, "order-42", None))
    assert held == (Verdict.DUPLICATE, first)  # the reply names the holder
    assert raw.exists(queue.job_key(second)) == 0  # nothing written for the refused one
    assert 0 < raw.pttl(queue.k.dedupe("order-42")) <= 300
    # The window ends on the server's clock: the key is free again.
    await wait_for(lambda: _gone(raw, queue.k.dedupe("order-42")))
    assert await queue.admit(third, b"3", **w) is Verdict.ENQUEUED
    assert assert_consistent(raw, queue.name) == {first: "pending", third: "pending"}


async def _gone(raw: redis.Redis, key: str) -> bool:
    return raw.exists(key) == 0


async def test_the_window_outlives_a_row_retention_deleted(
        conn: object, qname: str, raw: redis.Redis) -> None:
    queue = AsyncQueue(conn, qname, options=QueueOptions(keep_done_ms=0))  # type: ignore[arg-type]
    job, plain = jid(), jid()
    assert await queue.admit(job, b"1", dedupe_ms=60_000) is Verdict.ENQUEUED
    assert await queue.admit(plain, b"1") is Verdict.ENQUEUED
    for lease in await queue.claim(2, lease_ms=60_000):
        await queue.complete(lease)
    assert raw.exists(queue.job_key(job)) == raw.exists(queue.job_key(plain)) == 0
    assert await queue.admit(plain, b"again") is Verdict.ENQUEUED  # retention was its window
    assert await queue.admit(job, b"again", dedupe_ms=60_000) is Verdict.DUPLICATE
    assert await queue.admit_many([(job, b"x"), (jid(), b"y")], dedupe_ms=60_000) == [
        Verdict.DUPLICATE, Verdict.ENQUEUED]


async def test_debounce_replaces_the_waiting_holder_and_moves_its_due_time(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    first, second = jid(), jid()
    w = {"dedupe_ms": 60_000, "dedupe_key": "profile-7", "dedupe_mode": "debounce"}
    assert await queue.admit(first, b"v1", delay_ms=3_600_000, **w) is Verdict.ENQUEUED
    assert await queue.admit(second, b"v2", **w) is Verdict.REPLACED  # due now, new payload
    assert raw.exists(queue.job_key(second)) == 0
    assert raw.hget(queue.job_key(first), "payload") == b"v2"
    assert assert_consistent(raw, queue.name) == {first: "pending"}
    assert await queue.admit(jid(), b"v3", delay_ms=3_600_000, **w) is Verdict.REPLACED
    assert assert_consistent(raw, queue.name) == {first: "delayed"}  # moved later again
    assert await queue.claim(1, lease_ms=1000) == []


async def test_debounce_leaves_a_running_holder_alone_and_the_new_job_waits_for_it(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    first, second, third = jid(), jid(), jid()
    w = {"dedupe_ms": 60_000, "dedupe_key": "feed-3", "dedupe_mode": "debounce"}
    assert await queue.admit(first, b"v1", **w) is Verdict.ENQUEUED
    (running,) = await queue.claim(1, lease_ms=60_000)
    assert await queue.admit(second, b"v2", **w) is Verdict.ENQUEUED  # a new job, held back
    assert await queue.admit(third, b"v3", **w) is Verdict.REPLACED  # into the waiting one
    assert await queue.claim(5, lease_ms=60_000) == []  # the serial lane waits for first
    assert raw.hget(queue.job_key(first), "payload") == b"v1"  # the running one untouched
    await queue.complete(running)
    (nxt,) = await queue.claim(5, lease_ms=60_000)
    assert (nxt.id, nxt.payload) == (second, b"v3")


async def test_many_held_admissions_in_one_pipeline_each_name_their_holder(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    """admit_held_many: per item its verdict and the key's holder after it; an item naming
    a holder that is not the key's is asked again naming the right one; a bad item is its
    typed error and the others are written as if alone."""
    a1, a2, b1, b2, bad = jid(), jid(), jid(), jid(), jid()
    first = await queue.admission.admit_held_many(
        [(a1, b"a1", "note-a", "pa", 3_600_000, ""), (b1, b"b1", "note-b", None, 3_600_000, "")],
        dedupe_ms=60_000)
    assert first == [(Verdict.ENQUEUED, a1), (Verdict.ENQUEUED, b1)]
    again = await queue.admission.admit_held_many(
        [(a2, b"a2", "note-a", "pa", 3_600_000, a1),  # names its holder
         (bad, b"x", "", None, 0, ""),  # an empty dedupe key
         (b2, b"b2", "note-b", None, 0, jid())],  # names another: asked again
        dedupe_ms=60_000)
    assert again[0] == (Verdict.REPLACED, a1) and again[2] == (Verdict.REPLACED, b1)
    assert isinstance(again[1], InvalidArgument)
    assert raw.hget(queue.job_key(a1), "payload") == b"a2"
    assert raw.hget(queue.job_key(b1), "payload") == b"b2"
    assert assert_consistent(raw, queue.name) == {a1: "delayed", b1: "pending"}
    assert raw.exists(queue.job_key(a2), queue.job_key(b2), queue.job_key(bad)) == 0


async def test_debounce_on_a_lane_of_ones_own_needs_it_serial(queue: AsyncQueue) -> None:
    with pytest.raises(InvalidArgument, match="serial"):
        await queue.admit(jid(), b"x", lane="l", dedupe_ms=10, dedupe_mode="debounce")
    assert await queue.admit(jid(), b"x", lane="l", serial=True, dedupe_ms=10,
                             dedupe_mode="debounce") is Verdict.ENQUEUED


@pytest.mark.parametrize("kw", [
    {"dedupe_ms": -1}, {"dedupe_ms": 0}, {"dedupe_ms": MAX_DEDUPE_MS + 1}, {"dedupe_ms": 1.5},
    {"dedupe_ms": True}, {"dedupe_mode": "debounce"}, {"dedupe_key": "k"},
    {"dedupe_ms": 10, "dedupe_mode": "latest"}, {"dedupe_ms": 10, "dedupe_key": ""},
    {"dedupe_ms": 10, "dedupe_key": "k" * (MAX_DEDUPE_KEY + 1)}, {"dedupe_ms": 10, "dedupe_key": 7},
    {"dedupe_ms": 10, "dedupe_key": "a\ud800"},
])
async def test_bad_windows_are_typed_errors_before_any_write(
        queue: AsyncQueue, raw: redis.Redis, kw: dict[str, object]) -> None:
    with pytest.raises(InvalidArgument):
        await queue.admit(jid(), b"x", **kw)  # type: ignore[arg-type]
    if "dedupe_key" not in kw:
        with pytest.raises(InvalidArgument):
            await queue.admit_many([(jid(), b"x")], **kw)  # type: ignore[arg-type]
    assert keys_of(raw, queue.name) == set()


async def test_a_resend_answers_what_its_first_send_got(
        queue: AsyncQueue, conn: object) -> None:
    for mode in p.dedupe.MODES:
        job = jid()
        call = p.deduped(queue.k, job, b"x", key="resent-" + mode, window_ms=60_000, mode=mode,
                         lane="dd:resent-" + mode, delay_ms=0, serial=True, max_attempts=None,
                         token="t-" + mode)
        first = await conn.run(call)  # type: ignore[attr-defined]
        assert p.decode_deduped(first) == p.decode_deduped(await conn.run(call)) == (  # type: ignore[attr-defined]
            Verdict.ENQUEUED, job)
