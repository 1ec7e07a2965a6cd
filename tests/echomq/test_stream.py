"""The asyncio stream of the bulk wire: its read timeout, kept by one watchdog per connection."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest

from echomq.client._stream import AsyncStream
from echomq.client._wire import Target


@pytest.fixture
async def server() -> AsyncIterator[tuple[Target, asyncio.Queue[asyncio.StreamWriter]]]:
    """A loopback server that answers nothing by itself: the test writes to its side."""
    peers: asyncio.Queue[asyncio.StreamWriter] = asyncio.Queue()
    opened: list[asyncio.StreamWriter] = []

    async def accepted(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        opened.append(writer)
        await peers.put(writer)

    srv = await asyncio.start_server(accepted, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    yield (Target(host="127.0.0.1", port=port, path=None, username=None, password=None,
                  db=0, timeout=0.3), peers)
    srv.close()
    for writer in opened:  # every socket the server side opened, closed before the loop ends
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    await srv.wait_closed()


async def test_a_read_the_server_never_answers_times_out_at_the_timeout(server) -> None:  # type: ignore[no-untyped-def]
    target, peers = server
    stream = await AsyncStream.connect(target)
    await peers.get()
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        await stream.read()
    assert 0.29 <= time.monotonic() - t0 < 1.0
    stream.close()


async def test_a_read_is_timed_from_its_own_start_not_the_first_reads(server) -> None:  # type: ignore[no-untyped-def]
    """The watchdog armed by a first read fires while a second one waits, short of the
    second's deadline: it waits on, and gets its bytes."""
    target, peers = server
    stream = await AsyncStream.connect(target)
    peer = await peers.get()
    peer.write(b"+one\r\n")
    assert await stream.read() == b"+one\r\n"  # armed the watchdog for t0 + 0.3
    await asyncio.sleep(0.2)

    async def answer_late() -> None:
        await asyncio.sleep(0.2)  # past the first read's deadline, within the second's
        peer.write(b"+two\r\n")

    late = asyncio.create_task(answer_late())
    assert await stream.read() == b"+two\r\n"
    await late
    # and the watchdog still keeps time: a third read the server never answers ends
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        await stream.read()
    assert 0.29 <= time.monotonic() - t0 < 1.0
    stream.close()


async def test_a_closed_stream_leaves_no_watchdog(server) -> None:  # type: ignore[no-untyped-def]
    target, peers = server
    stream = await AsyncStream.connect(target)
    peer = await peers.get()
    peer.write(b"+one\r\n")
    assert await stream.read() == b"+one\r\n"
    stream.close()
    assert stream._watch is None
