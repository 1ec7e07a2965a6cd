"""The bulk wire's exchange on canned streams: the order of writes and reads, replies in
order with errors in place, and what a broken, silent or refusing connection leaves.

A canned stream stands in for the connection (a fake of the stream seam, never of the
server); the wire against a real server is run by the connector tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import hiredis
import pytest
from redis import exceptions as rex

from echomq.client._async.wire import AsyncWire
from echomq.client._wire import Target, WireError, WireTimeout, pack_command

TARGET = Target(host="127.0.0.1", port=6379, path=None, username=None, password=None, db=0,
                timeout=1.0)


class CannedStream:
    """Answers each read with the next canned chunk (or raises it); records every write."""

    def __init__(self, *reads: bytes | BaseException) -> None:
        self.reads = list(reads)
        self.log: list[bytes] = []
        self.closed = False

    async def write(self, data: bytes) -> None:
        self.log.append(b"w:" + data)

    async def read(self) -> bytes:
        self.log.append(b"r")
        if not self.reads:
            raise OSError("connection closed by server")
        item = self.reads.pop(0)
        if isinstance(item, BaseException):
            raise item
        return item

    def close(self) -> None:
        self.closed = True


def wire_of(*streams: CannedStream, target: Target = TARGET) -> AsyncWire:
    """A wire whose connections are ``streams``, one per connection opened, in order."""
    it = iter(streams)

    async def open_stream(_: Target) -> Any:
        return next(it)

    return AsyncWire(target, open_stream=open_stream)


async def test_two_flushes_are_in_flight_and_replies_come_in_order() -> None:
    stream = CannedStream(b":1\r\n", b":2\r\n", b":3\r\n:4", b"\r\n")
    wire = wire_of(stream)
    assert await wire.run([(b"A", 1), (b"B", 1), (b"C", 2)]) == [1, 2, 3, 4]
    # flush k+1 is written before the replies of flush k are read
    assert stream.log == [b"w:A", b"w:B", b"r", b"w:C", b"r", b"r", b"r"]
    assert not stream.closed


async def test_flushes_are_encoded_lazily() -> None:
    stream = CannedStream(b":1\r\n", b":2\r\n")
    encoded: list[int] = []

    def flushes() -> Iterator[tuple[bytes, int]]:
        for k in range(2):
            encoded.append(k)
            yield b"F%d" % k, 1

    assert await wire_of(stream).run(flushes()) == [1, 2]
    assert encoded == [0, 1]
    assert stream.log == [b"w:F0", b"w:F1", b"r", b"r"]


async def test_error_replies_come_back_in_place_and_are_not_raised() -> None:
    stream = CannedStream(b"-NOSCRIPT No matching script\r\n:1\r\n-EMQKIND not a job\r\n$-1\r\n")
    got = await wire_of(stream).run([(b"X", 4)])
    assert isinstance(got[0], rex.NoScriptError)
    assert got[1] == 1
    assert type(got[2]) is rex.ResponseError and str(got[2]) == "EMQKIND not a job"
    assert got[3] is None
    assert not stream.closed


async def test_a_connection_is_reused_until_the_wire_is_closed() -> None:
    first, second = CannedStream(b":1\r\n", b":2\r\n"), CannedStream(b":3\r\n")
    wire = wire_of(first, second)
    assert await wire.run([(b"A", 1)]) == [1]
    assert await wire.run([(b"B", 1)]) == [2]
    assert second.log == []  # the first connection served both runs
    await wire.aclose()
    assert first.closed
    assert await wire.run([(b"C", 1)]) == [3]
    assert first.log == [b"w:A", b"r", b"w:B", b"r"]


async def test_a_broken_connection_raises_with_the_replies_of_answered_flushes() -> None:
    broken, fresh = CannedStream(b":1\r\n", b":2"), CannedStream(b":9\r\n")
    wire = wire_of(broken, fresh)
    with pytest.raises(WireError) as caught:
        await wire.run([(b"A", 1), (b"B", 1), (b"C", 1)])
    assert caught.value.answered == [1]  # flush B's reply was cut: only A's is kept
    assert isinstance(caught.value, rex.ConnectionError)
    assert not isinstance(caught.value, WireTimeout)
    assert broken.closed
    assert await wire.run([(b"D", 1)]) == [9]  # the broken connection is not reused


async def test_a_silent_server_is_a_timeout() -> None:
    stream = CannedStream(b":1\r\n", TimeoutError())
    with pytest.raises(WireTimeout) as caught:
        await wire_of(stream).run([(b"A", 1), (b"B", 1)])
    assert caught.value.answered == [1]
    assert isinstance(caught.value, rex.TimeoutError)
    assert stream.closed


async def test_malformed_bytes_break_the_connection() -> None:
    stream = CannedStream(b"?what\r\n")
    with pytest.raises(WireError) as caught:
        await wire_of(stream).run([(b"A", 1)])
    assert isinstance(caught.value.__cause__, hiredis.ProtocolError)
    assert stream.closed


async def test_a_failure_of_the_caller_mid_exchange_closes_the_connection() -> None:
    stream, fresh = CannedStream(b":1\r\n"), CannedStream(b":2\r\n")

    def flushes() -> Iterator[tuple[bytes, int]]:
        yield b"A", 1
        raise ValueError("encoding failed")

    wire = wire_of(stream, fresh)
    with pytest.raises(ValueError, match="encoding failed"):
        await wire.run(flushes())
    assert stream.closed  # its replies could be out of step: never reused
    assert await wire.run([(b"B", 1)]) == [2]


async def test_hello_authenticates_and_selects_before_the_first_flush() -> None:
    target = Target(host="h", port=1, path=None, username="u", password="p", db=3, timeout=1.0)
    stream = CannedStream(b"+OK\r\n+OK\r\n", b":1\r\n")
    assert await wire_of(stream, target=target).run([(b"A", 1)]) == [1]
    assert stream.log == [b"w:" + pack_command("AUTH", "u", "p") + pack_command("SELECT", 3),
                          b"r", b"w:A", b"r"]


async def test_refused_credentials_raise_and_leave_no_connection_open() -> None:
    target = Target(host="h", port=1, path=None, username=None, password="bad", db=0, timeout=1.0)
    stream = CannedStream(b"-WRONGPASS invalid username-password pair\r\n")
    # Raised as redis-py raises it (an AuthenticationError), not as a broken connection
    # (WireError): the connector then refuses at once instead of retrying for its budget.
    with pytest.raises(rex.AuthenticationError) as caught:
        await wire_of(stream, target=target).run([(b"A", 1)])
    assert not isinstance(caught.value, WireError)
    assert "invalid username-password pair" in str(caught.value)
    assert stream.closed
    assert stream.log == [b"w:" + pack_command("AUTH", "bad"), b"r"]  # nothing else sent


async def test_one_call_returns_its_one_reply_and_keeps_the_connection() -> None:
    stream = CannedStream(b":1", b"\r\n", b"-ERR no\r\n")
    wire = wire_of(stream)
    assert await wire.call(b"A") == 1  # its reply in two reads
    err = await wire.call(b"B")  # an error reply is returned in place, never raised
    assert isinstance(err, rex.ResponseError) and str(err) == "no"
    assert stream.log == [b"w:A", b"r", b"r", b"w:B", b"r"]  # one connection for both
    assert not stream.closed


async def test_one_call_on_a_broken_connection_raises_and_the_next_opens_another() -> None:
    broken, fresh = CannedStream(b":1"), CannedStream(b":9\r\n")
    wire = wire_of(broken, fresh)
    with pytest.raises(WireError) as caught:
        await wire.call(b"A")
    assert caught.value.answered == []
    assert not isinstance(caught.value, WireTimeout)
    assert isinstance(caught.value.__cause__, OSError)
    assert broken.closed
    assert await wire.call(b"B") == 9


async def test_one_call_to_a_silent_server_is_a_timeout() -> None:
    stream = CannedStream(TimeoutError())
    with pytest.raises(WireTimeout):
        await wire_of(stream).call(b"A")
    assert stream.closed


async def test_one_call_refused_credentials_raise_as_they_are() -> None:
    target = Target(host="h", port=1, path=None, username=None, password="bad", db=0, timeout=1.0)
    stream = CannedStream(b"-WRONGPASS invalid username-password pair\r\n")
    with pytest.raises(rex.AuthenticationError) as caught:
        await wire_of(stream, target=target).call(b"A")
    assert not isinstance(caught.value, WireError)
    assert stream.closed
