"""The bulk wire against the real single server: big replies across many reads, many
flushes in order, a connection the server closed, a unix socket with a password."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis
import redis.asyncio as redis_client

from echomq.client._async.wire import AsyncWire
from echomq.client._wire import READ_SIZE, WireError, pack_command


@pytest.fixture
async def wire(valkey_url: str) -> AsyncIterator[AsyncWire]:
    client = redis_client.Redis.from_url(valkey_url, socket_timeout=10.0)
    found = AsyncWire.attach(client)
    assert found is not None
    yield found
    await found.aclose()
    await client.aclose()


async def test_a_big_bulk_reply_across_many_reads(wire: AsyncWire, valkey_url: str,
                                                  qname: str) -> None:
    big = bytes(range(256)) * (20 * READ_SIZE // 256)  # twenty reads' worth
    raw = redis.Redis.from_url(valkey_url)
    try:
        raw.set(f"emq:{{{qname}}}:big", big)
        got = await wire.run([(pack_command("GET", f"emq:{{{qname}}}:big") + pack_command("PING"), 2)])
        assert got == [big, b"PONG"]
    finally:
        raw.delete(f"emq:{{{qname}}}:big")
        raw.close()


async def test_many_flushes_answer_in_order(wire: AsyncWire) -> None:
    flushes = [(b"".join(pack_command("ECHO", f"{k}:{i}") for i in range(500)), 500)
               for k in range(40)]
    got = await wire.run(flushes)
    assert got == [f"{k}:{i}".encode() for k in range(40) for i in range(500)]


async def test_an_error_reply_inside_a_flush_is_in_place(wire: AsyncWire) -> None:
    got = await wire.run([(pack_command("PING") + pack_command("NOSUCHCOMMAND")
                           + pack_command("ECHO", "x"), 3)])
    assert got[0] == b"PONG" and got[2] == b"x"
    assert isinstance(got[1], redis.exceptions.ResponseError)


async def test_a_connection_the_server_closed_fails_then_reconnects(
        wire: AsyncWire, valkey_url: str) -> None:
    assert await wire.run([(pack_command("CLIENT", "SETNAME", "emq-wire-victim"), 1)]) == [b"OK"]
    raw = redis.Redis.from_url(valkey_url)
    try:
        victims = [c for c in raw.client_list() if c["name"] == "emq-wire-victim"]
        assert len(victims) == 1
        raw.client_kill_filter(_id=victims[0]["id"])
    finally:
        raw.close()
    with pytest.raises(WireError) as caught:  # the idle connection it kept is gone
        await wire.run([(pack_command("PING"), 1)])
    assert caught.value.answered == []
    assert await wire.run([(pack_command("PING"), 1)]) == [b"PONG"]  # a fresh connection


async def test_a_unix_socket_with_a_password_and_a_db(tmp_path_factory: pytest.TempPathFactory) -> None:
    from echomq.servers.server import EmbeddedValkey

    sock = tmp_path_factory.mktemp("wire") / "v.sock"
    extra = {"unixsocket": str(sock), "unixsocketperm": "700", "requirepass": "s3cret"}
    with EmbeddedValkey(extra=extra, appendonly=False):
        client = redis_client.Redis.from_url(f"unix://:s3cret@{sock}?db=2")
        found = AsyncWire.attach(client)
        assert found is not None and found.target.path == str(sock)
        try:
            got = await found.run([(pack_command("SET", "k", "v") + pack_command("CLIENT", "INFO"), 2)])
            assert got[0] == b"OK"
            assert b"db=2" in got[1] and f"addr={sock}:0".encode() in got[1]
        finally:
            await found.aclose()
            await client.aclose()
