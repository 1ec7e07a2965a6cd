"""The bulk wire's stream seam: one small byte stream per I/O flavour, nothing else.

The wire's exchange (:mod:`echomq.client._async.wire`, generated into :mod:`echomq.client._sync.wire`)
is written once against this interface; these two classes are the only hand-written
I/O of the wire (httpcore keeps its network backends apart the same way):

* ``connect(target)``: open a connection to the target (TCP with ``TCP_NODELAY``, or
  a unix socket), within the target's timeout;
* ``write(data)``: send all of ``data``;
* ``read()``: some bytes (up to :data:`echomq.client._wire.READ_SIZE`); raises ``OSError`` when
  the server closed the connection and ``TimeoutError`` when it stayed silent for the
  target's timeout;
* ``close()``: release the connection at once (never waits, so it is safe while a
  task is being cancelled).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket

from echomq.client._wire import READ_SIZE, Target

__all__ = ["AsyncStream", "Stream"]


class AsyncStream:
    """An asyncio connection (asyncio sets ``TCP_NODELAY`` on its TCP transports)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 timeout: float | None) -> None:
        self._reader, self._writer, self._timeout = reader, writer, timeout

    @classmethod
    async def connect(cls, target: Target) -> AsyncStream:
        async with asyncio.timeout(target.timeout):
            if target.path is not None:
                reader, writer = await asyncio.open_unix_connection(target.path, limit=READ_SIZE)
            else:
                reader, writer = await asyncio.open_connection(
                    target.host, target.port, limit=READ_SIZE)
        return cls(reader, writer, target.timeout)

    async def write(self, data: bytes) -> None:
        writer = self._writer
        writer.write(data)  # sent now, as far as the socket takes it
        if not writer.transport.get_write_buffer_size():
            return  # all of it went out: nothing to wait for (a broken connection shows on the read)
        async with asyncio.timeout(self._timeout):
            await writer.drain()

    async def read(self) -> bytes:
        async with asyncio.timeout(self._timeout):
            data = await self._reader.read(READ_SIZE)
        if not data:
            raise OSError("connection closed by server")
        return data

    def close(self) -> None:
        self._writer.close()


class Stream:
    """A blocking socket; its timeout applies to every send and receive."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    @classmethod
    def connect(cls, target: Target) -> Stream:
        if target.path is not None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(target.timeout)
            try:
                sock.connect(target.path)
            except BaseException:
                sock.close()
                raise
        else:
            sock = socket.create_connection((target.host or "localhost", target.port),
                                            timeout=target.timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(sock)

    def write(self, data: bytes) -> None:
        self._sock.sendall(data)

    def read(self) -> bytes:
        data = self._sock.recv(READ_SIZE)
        if not data:
            raise OSError("connection closed by server")
        return data

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()
