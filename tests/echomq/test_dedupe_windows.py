"""Dedupe windows beyond the API tests (issue 28 item 2; docs/protocol.md "Dedupe
windows"): the scripts' own refusals (a client that skips the Python checks writes
nothing), the memory of one dedupe entry and its bound, and sharded queues, where the
dedupe key chooses the shard. The API behaviour: tests/echomq/_async/test_dedupe.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis

from echomq import AsyncQueue, AsyncShardedQueue, InvalidArgument, Verdict, generate
from echomq import protocol as p
from echomq.core.bounds import MAX_DEDUPE_KEY, MAX_DEDUPE_MS
from echomq.core.errors import ProtocolVersionError
from tests.conftest import keys_of
from tests.echomq.invariants import assert_consistent

ENTRY_BYTES = 128  # MEMORY USAGE of an entry is at most this plus its key name's length
# (measured on Valkey 8.1: 96 bytes for emq:{q}:dd:order-42, 288 for a 200-character key)


def _args(q: AsyncQueue, job: str, window: object, mode: str, lane: str = "l",
          serial: str = "1") -> tuple[list[str], list[Any]]:
    call = p.deduped(q.k, job, b"x", key="k", window_ms=1, mode=mode, lane=lane, delay_ms=0,
                     serial=serial == "1", max_attempts=None, token="t")
    args = list(call.args)
    args[9] = window
    return list(call.keys), args


@pytest.mark.parametrize("mode", p.dedupe.MODES)
async def test_the_scripts_refuse_bad_windows_themselves(
        conn: Any, qname: str, raw: redis.Redis, mode: str) -> None:
    q = AsyncQueue(conn, qname)
    source = p.calls.load(mode).source
    for window in (-1, 0, MAX_DEDUPE_MS + 1, "1.5", "x"):
        keys, args = _args(q, generate("JOB"), window, mode)
        with pytest.raises(redis.ResponseError, match=r"^EMQARG dedupe_ms"):
            raw.eval(source, len(keys), *keys, *args)
    keys, args = _args(q, generate("JOB"), 10, mode)
    keys[6] = keys[6][: -len("dd:k")] + "dd:" + "k" * 801  # a key past 800 bytes
    with pytest.raises(redis.ResponseError, match=r"^EMQKEYS"):
        raw.eval(source, len(keys), *keys, *args)
    if mode == "debounce":
        keys, args = _args(q, generate("JOB"), 10, mode, serial="0")
        with pytest.raises(redis.ResponseError, match=r"^EMQARG a debounced job"):
            raw.eval(source, len(keys), *keys, *args)
    assert keys_of(raw, qname) == set()  # nothing written by any refusal


async def test_one_dedupe_entry_costs_a_bounded_few_hundred_bytes_and_expires(
        conn: Any, qname: str, raw: redis.Redis) -> None:
    q = AsyncQueue(conn, qname)
    for key in ("order-42", "x" * 64, "y" * MAX_DEDUPE_KEY):
        await q.admit(generate("JOB"), b"", dedupe_ms=3_600_000, dedupe_key=key)
        used = raw.memory_usage(q.k.dedupe(key), samples=0)
        assert used is not None and used <= ENTRY_BYTES + len(q.k.dedupe(key)), (key, used)
        assert 0 < raw.pttl(q.k.dedupe(key)) <= 3_600_000  # gone with its window, never later


async def test_a_sharded_queue_dedupes_by_key_across_its_shards(
        conn: Any, qname: str, raw: redis.Redis) -> None:
    q = AsyncShardedQueue(conn, qname, shards=3)
    first = generate("JOB")
    w = {"dedupe_ms": 60_000, "dedupe_key": "order-9"}
    assert await q.admit(first, b"1", **w) is Verdict.ENQUEUED
    others: list[str] = []  # two ids of each shard: one key, one shard
    while len(others) < 6:
        i = generate("JOB")
        if sum(q.layout.index(o) == q.layout.index(i) for o in others) < 2:
            others.append(i)
    assert [await q.admit(i, b"2", **w) for i in others] == [Verdict.DUPLICATE] * 6
    d = {"dedupe_ms": 60_000, "dedupe_key": "feed-1", "dedupe_mode": "debounce"}
    held = generate("JOB")
    assert await q.admit(held, b"v1", delay_ms=60_000, **d) is Verdict.ENQUEUED
    assert [await q.admit(i, b"v2", **d) for i in others] == [Verdict.REPLACED] * 6
    leases = await q.claim(20, lease_ms=60_000)
    assert {(x.id, x.payload) for x in leases} == {(first, b"1"), (held, b"v2")}
    with pytest.raises(InvalidArgument, match="dedupe_key with a lane"):
        await q.admit(generate("JOB"), b"x", lane="l", **w)
    stats = await q.stats()
    assert (stats.pending, stats.delayed, stats.active) == (0, 0, 2)  # nothing else admitted


@pytest.mark.parametrize("mode", p.dedupe.MODES)
async def test_both_modes_are_refused_on_another_major_and_write_nothing(
        conn: Any, qname: str, raw: redis.Redis, mode: str) -> None:
    q = AsyncQueue(conn, qname)
    holder = generate("JOB")
    await q.admit(holder, b"1", dedupe_ms=60_000, dedupe_key="k", dedupe_mode=mode, delay_ms=60_000)
    raw.hset(q.keys["meta"], "protocol", "echomq:4.0.0")
    before = {k: raw.dump(k) for k in sorted(keys_of(raw, qname))}
    for job in (holder, generate("JOB")):
        with pytest.raises(ProtocolVersionError):
            await q.admit(job, b"2", dedupe_ms=60_000, dedupe_key="k", dedupe_mode=mode)
    assert {k: raw.dump(k) for k in sorted(keys_of(raw, qname))} == before


@pytest.mark.parametrize("mode", p.dedupe.MODES)
async def test_concurrent_admissions_of_one_key_make_one_job(
        conn: Any, qname: str, raw: redis.Redis, mode: str) -> None:
    """Twenty admissions in flight at once (debounce's holder changes under most of them:
    each asks again naming the new holder): one job, every other call refused or merged."""
    q = AsyncQueue(conn, qname)
    w = {"dedupe_ms": 60_000, "dedupe_key": "burst", "dedupe_mode": mode}
    verdicts = await asyncio.gather(*(q.admit(generate("JOB"), b"%d" % i, delay_ms=60_000, **w)
                                      for i in range(20)))
    later = Verdict.DUPLICATE if mode == "throttle" else Verdict.REPLACED
    assert sorted(v.value for v in verdicts) == sorted([Verdict.ENQUEUED.value] + [later.value] * 19)
    (job,) = assert_consistent(raw, qname)
    assert raw.get(q.k.dedupe("burst")) == job.encode()


async def test_a_sharded_admit_many_gives_each_item_a_window_on_its_id(
        conn: Any, qname: str) -> None:
    q = AsyncShardedQueue(conn, qname, shards=3)
    ids = [generate("JOB") for _ in range(6)]
    d = {"dedupe_ms": 60_000, "dedupe_mode": "debounce"}
    assert await q.admit_many([(i, b"v1", None) for i in ids], **d) == [Verdict.ENQUEUED] * 6
    assert await q.admit_many([(i, b"v2", None) for i in ids], **d) == [Verdict.REPLACED] * 6
    assert await q.admit(ids[0], b"v3", **d) is Verdict.REPLACED  # the same shard as admit_many's
    got = {x.id: x.payload for x in await q.claim(10, lease_ms=60_000)}
    assert got == {ids[0]: b"v3", **{i: b"v2" for i in ids[1:]}}
    assert await q.admit_many([(ids[1], b"x", None)], dedupe_ms=60_000) == [Verdict.DUPLICATE]
    with pytest.raises(InvalidArgument):
        await q.admit_many([(ids[1], b"x", None)], dedupe_ms=-1)
