"""Admission, single and bulk, against a real server (docs/protocol.md, "Admission")."""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

import pytest
import redis

from echomq import (
    PROTOCOL,
    AsyncConnector,
    AsyncQueue,
    ConfigurationError,
    InvalidJobId,
    InvalidPayload,
    PayloadTooLarge,
    ProtocolVersionError,
    QueueOptions,
    ServerUnavailable,
    Verdict,
    generate,
)
from echomq import protocol as p
from tests.conftest import keys_of


def jid() -> str:
    return generate("JOB")


def base_keys(q: str) -> set[str]:
    return {f"emq:{{{q}}}:pending", f"emq:{{{q}}}:meta"}


async def test_enqueue_writes_row_and_pending(queue: AsyncQueue, raw: redis.Redis) -> None:
    j = jid()
    assert await queue.enqueue(j, b"hello") is Verdict.ENQUEUED
    row = raw.hgetall(f"emq:{{{queue.name}}}:job:{j}")
    assert len(row.pop(b"tok")) == 16  # the admitting call's token (docs/protocol.md)
    assert row == {b"state": b"pending", b"attempts": b"0", b"payload": b"hello"}
    assert raw.zrange(f"emq:{{{queue.name}}}:pending", 0, -1, withscores=True) == [(j.encode(), 0.0)]
    assert keys_of(raw, queue.name) == base_keys(queue.name) | {f"emq:{{{queue.name}}}:job:{j}"}
    assert raw.hget(f"emq:{{{queue.name}}}:meta", "protocol") == PROTOCOL.encode()


async def test_duplicate_leaves_the_row_untouched(queue: AsyncQueue, raw: redis.Redis) -> None:
    j = jid()
    assert await queue.enqueue(j, b"first") is Verdict.ENQUEUED
    assert await queue.enqueue(j, b"second") is Verdict.DUPLICATE
    assert raw.hget(f"emq:{{{queue.name}}}:job:{j}", "payload") == b"first"
    assert raw.zcard(f"emq:{{{queue.name}}}:pending") == 1


async def test_wrong_kind_writes_nothing(queue: AsyncQueue, raw: redis.Redis) -> None:
    other = generate("ORD")
    assert await queue.enqueue(other, b"x") is Verdict.KIND
    assert keys_of(raw, queue.name) == set()  # not even the protocol version


async def test_enqueue_many_verdicts_in_input_order(queue: AsyncQueue, raw: redis.Redis) -> None:
    existing = jid()
    assert await queue.enqueue(existing, b"old") is Verdict.ENQUEUED
    items = [(jid(), b"p%d" % i) for i in range(10)]
    items[3] = (existing, b"new")  # duplicate at k=3
    items[7] = (generate("ORD"), b"kind")  # wrong kind at j=7
    verdicts = await queue.enqueue_many(items)
    expect = [Verdict.ENQUEUED] * 10
    expect[3], expect[7] = Verdict.DUPLICATE, Verdict.KIND
    assert verdicts == expect
    assert raw.hget(f"emq:{{{queue.name}}}:job:{existing}", "payload") == b"old"
    assert raw.zcard(f"emq:{{{queue.name}}}:pending") == 9
    job_keys = {f"emq:{{{queue.name}}}:job:{i}" for i, _ in items if i.startswith("JOB")}
    assert keys_of(raw, queue.name) == base_keys(queue.name) | job_keys


async def test_repeated_id_inside_one_batch(queue: AsyncQueue, raw: redis.Redis) -> None:
    a, b = jid(), jid()
    verdicts = await queue.enqueue_many([(a, b"1"), (b, b"2"), (a, b"3"), (a, b"4")])
    assert verdicts == [Verdict.ENQUEUED, Verdict.ENQUEUED, Verdict.DUPLICATE, Verdict.DUPLICATE]
    assert raw.hget(f"emq:{{{queue.name}}}:job:{a}", "payload") == b"1"


async def test_bad_items_get_their_error_in_place(queue: AsyncQueue, raw: redis.Redis) -> None:
    small = AsyncQueue(queue.connector, queue.name, options=QueueOptions(max_payload=4))
    good = jid()
    verdicts = await small.enqueue_many([("JOB{x}", b"1"), (good, b"2"), (jid(), b"12345")])
    assert isinstance(verdicts[0], InvalidJobId)
    assert verdicts[1] is Verdict.ENQUEUED
    assert isinstance(verdicts[2], PayloadTooLarge)
    assert raw.zrange(f"emq:{{{queue.name}}}:pending", 0, -1) == [good.encode()]


async def test_long_batches_are_chunked(conn: AsyncConnector, qname: str, raw: redis.Redis) -> None:
    q = AsyncQueue(conn, qname, options=QueueOptions(batch=100))
    items = [(jid(), b"x") for _ in range(1050)]
    assert await q.enqueue_many(items) == [Verdict.ENQUEUED] * 1050
    assert await q.pending_size() == 1050


async def test_oversized_payload_fails_before_any_write(conn: AsyncConnector, qname: str,
                                                        raw: redis.Redis) -> None:
    q = AsyncQueue(conn, qname, options=QueueOptions(max_payload=10))
    with pytest.raises(PayloadTooLarge):
        await q.enqueue(jid(), b"x" * 11)
    with pytest.raises(TypeError):
        await q.enqueue(jid(), "text")  # type: ignore[arg-type]
    assert keys_of(raw, qname) == set()


@pytest.mark.parametrize(
    "payload",
    [b"", b"\x00\xff\xfe", "🎲🎯".encode(), b"\xc3\x28", b"redis.call('FLUSHALL')", b"}{:\r\n",
     bytes(range(256))],
)
async def test_hostile_payloads_are_stored_exactly(queue: AsyncQueue, raw: redis.Redis,
                                                   payload: bytes) -> None:
    j = jid()
    assert await queue.enqueue(j, payload) is Verdict.ENQUEUED
    assert raw.hget(f"emq:{{{queue.name}}}:job:{j}", "payload") == payload


@pytest.mark.parametrize(
    "bad_id",
    ["JOB{cm}0000000000000000000000", "JOB\x000000000000000000000000000", "JOB\n", "JOB🎲🎲",
     "JOB') redis.call('FLUSHALL') --", "JOB:1", "", "JOB" + "0" * 27],
)
async def test_hostile_ids_are_refused_before_io(queue: AsyncQueue, raw: redis.Redis,
                                                 bad_id: str) -> None:
    with pytest.raises(InvalidJobId):
        await queue.enqueue(bad_id, b"x")
    assert keys_of(raw, queue.name) == set()


async def test_noscript_after_script_flush(queue: AsyncQueue, raw: redis.Redis) -> None:
    assert await queue.enqueue(jid(), b"a") is Verdict.ENQUEUED
    raw.script_flush()
    assert await queue.enqueue(jid(), b"b") is Verdict.ENQUEUED
    raw.script_flush()
    dup = jid()
    assert await queue.enqueue_many([(dup, b"c"), (dup, b"d")]) == [Verdict.ENQUEUED,
                                                                     Verdict.DUPLICATE]
    assert await queue.pending_size() == 3


async def test_noscript_inside_a_pipeline(queue: AsyncQueue, raw: redis.Redis) -> None:
    # enqueue_many loads once; flush between the load and the pipeline by loading first
    await queue.enqueue(jid(), b"warm")
    raw.script_flush()
    items = [(jid(), b"x") for _ in range(50)]
    calls = [p.enqueue(queue.k, i, data) for i, data in items]
    replies = await queue.connector.pipeline(calls)
    assert replies == [1] * 50


async def test_a_batch_after_script_flush_is_resent_whole_and_in_order(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    # The queue loads its scripts once; a later batch on a flushed cache answers NOSCRIPT
    # for every call and the connector resends exactly those, building them again.
    assert await queue.enqueue_many([(jid(), b"first")]) == [Verdict.ENQUEUED]
    await queue.admit(jid(), b"lane warm", lane="l")  # admit.lua loaded too
    raw.script_flush()
    dup, other = jid(), jid()
    items = [(dup, b"a"), (jid(), b"b", "l"), ("JOB-bad", b"c"), (dup, b"d"), [other, b"e"],
             (jid(), "not bytes"), (other, b"f")] + [(jid(), b"x" * 64) for _ in range(2500)]
    verdicts = await queue.enqueue_many(items)  # type: ignore[arg-type]
    assert verdicts[:2] == [Verdict.ENQUEUED, Verdict.ENQUEUED]
    assert isinstance(verdicts[2], InvalidJobId)
    assert verdicts[3:5] == [Verdict.DUPLICATE, Verdict.ENQUEUED]
    assert isinstance(verdicts[5], InvalidPayload)
    assert verdicts[6:] == [Verdict.DUPLICATE] + [Verdict.ENQUEUED] * 2500
    assert raw.hget(f"emq:{{{queue.name}}}:job:{dup}", "payload") == b"a"
    assert raw.hget(f"emq:{{{queue.name}}}:job:{other}", "payload") == b"e"
    assert await queue.pending_size() == 2 + 3 + 2500  # the warm-ups, then 3 + 2,500 admitted


async def test_restart_between_calls_keeps_rows(own_server) -> None:  # type: ignore[no-untyped-def]
    conn = AsyncConnector.from_url(own_server.url)
    try:
        q = AsyncQueue(conn, "restart")
        first = jid()
        assert await q.enqueue(first, b"kept") is Verdict.ENQUEUED
        # Kill -9 once the admission is in the AOF file (a kill -9 keeps what was written;
        # the everysec fsync only matters if the machine itself goes down).
        raw = redis.Redis.from_url(own_server.url)
        aof = own_server.data_dir / "appendonlydir"
        deadline = time.monotonic() + 10
        while not any(first.encode() in f.read_bytes() for f in aof.glob("*.aof")):
            assert time.monotonic() < deadline, "admission never reached the AOF"
            await asyncio.sleep(0.01)
        own_server.kill()
        own_server.start()
        assert await q.enqueue(first, b"again") is Verdict.DUPLICATE
        assert await q.enqueue(jid(), b"new") is Verdict.ENQUEUED  # scripts reloaded (NOSCRIPT)
        assert raw.hget(f"emq:{{restart}}:job:{first}", "payload") == b"kept"
        raw.close()
    finally:
        await conn.aclose()


async def test_version_fence_refuses_another_major(queue: AsyncQueue, raw: redis.Redis) -> None:
    raw.hset(f"emq:{{{queue.name}}}:meta", "protocol", "echomq:2.9.0")
    with pytest.raises(ProtocolVersionError, match=r"echomq:2\.9\.0"):
        await queue.enqueue(jid(), b"x")
    assert keys_of(raw, queue.name) == {f"emq:{{{queue.name}}}:meta"}  # as the test left it


async def test_version_fence_accepts_same_major(queue: AsyncQueue, raw: redis.Redis) -> None:
    raw.hset(f"emq:{{{queue.name}}}:meta", "protocol", "echomq:3.4.1")
    assert await queue.enqueue(jid(), b"x") is Verdict.ENQUEUED


async def test_a_wrong_password_is_a_configuration_error_not_an_outage() -> None:
    """WRONGPASS/NOAUTH are not retried for the whole budget as if the server were down:
    the first refusal is the caller's ConfigurationError, and nothing is written."""
    from echomq.servers.server import EmbeddedValkey

    with EmbeddedValkey(extra={"requirepass": "s3cret"}) as server:
        for auth, code in ((":wrong@", "WRONGPASS"), ("", "NOAUTH")):
            conn = AsyncConnector.from_url(f"redis://{auth}127.0.0.1:{server.port}",
                                           retry_budget_s=60.0)
            try:
                with pytest.raises(ConfigurationError) as caught:
                    await AsyncQueue(conn, "auth").enqueue(jid(), b"x")
                assert not isinstance(caught.value, ServerUnavailable)
                assert code in str(caught.value)
                if code == "WRONGPASS":  # the bulk wire refuses at its AUTH, not as an outage
                    with pytest.raises(ConfigurationError) as caught:
                        await AsyncQueue(conn, "auth").enqueue_many([(jid(), b"x")])
                    assert code in str(caught.value)
            finally:
                await conn.aclose()
        admin = AsyncConnector.from_url(f"redis://:s3cret@127.0.0.1:{server.port}")
        try:
            assert await admin.command("DBSIZE") == 0  # nothing written
        finally:
            await admin.aclose()


async def test_connects_over_a_unix_socket_with_a_password() -> None:
    # A short folder: a socket path is cut at the kernel's sun_path limit, and pytest's
    # tmp_path under a parallel run (.../popen-gw2/test_connects_over_a_unix_sock0) can pass it.
    with tempfile.TemporaryDirectory(prefix="emq-", dir="/tmp") as short:
        await _unix_socket_round_trip(Path(short) / "v.sock")


async def _unix_socket_round_trip(sock: Path) -> None:
    from echomq.servers.server import EmbeddedValkey

    extra = {"unixsocket": str(sock), "unixsocketperm": "700", "requirepass": "s3cret"}
    with EmbeddedValkey(extra=extra):
        conn = AsyncConnector.from_url(f"unix://:s3cret@{sock}")
        try:
            q = AsyncQueue(conn, "unix")
            a, b = jid(), jid()
            assert await q.enqueue(a, b"x") is Verdict.ENQUEUED
            assert await q.enqueue_many([(a, b"y"), (b, b"z")]) == [Verdict.DUPLICATE,
                                                                   Verdict.ENQUEUED]
            # The connection really is the socket: the server sees a unix-socket client.
            info = (await conn.command("CLIENT", "INFO")).decode()
            assert f"addr={sock}:0" in info, info
        finally:
            await conn.aclose()
