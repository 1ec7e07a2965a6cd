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
    """An asyncio connection (asyncio sets ``TCP_NODELAY`` on its TCP transports).

    The read timeout is kept by one watchdog timer per connection, not a timer per read:
    ``asyncio.timeout`` around each read cost ~10 µs of client CPU per call (a timer
    scheduled and cancelled, the task's cancel bookkeeping; ``bench/latency_probe.py``'s
    driver reads one reply per admission, on the idle hand-off's path). A read notes when
    it began; the watchdog, armed by the first read while none is armed, fires at that
    read's deadline and either finds a read waiting since ``timeout`` or more (it ends that
    read with ``TimeoutError``), or re-arms itself at the deadline of the read now waiting,
    or, with none waiting, disarms until the next read. So a read that waits ``timeout``
    raises ``TimeoutError`` then, as before; a connection that timed out is closed by its
    caller (the wire's ``BROKEN``) and never read again.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 timeout: float | None) -> None:
        self._reader, self._writer, self._timeout = reader, writer, timeout
        self._loop = asyncio.get_running_loop()
        self._since: float | None = None  # loop time the waiting read began; None: none waits
        self._watch: asyncio.TimerHandle | None = None  # the armed watchdog, if any
        self._expired = False  # the watchdog ended a read: the connection is done

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
        timeout = self._timeout
        if timeout is not None:
            self._since = now = self._loop.time()
            if self._watch is None:
                self._watch = self._loop.call_at(now + timeout, self._check)
        try:
            data = await self._reader.read(READ_SIZE)
        finally:
            self._since = None
        if self._expired:  # the deadline and the bytes came in one loop turn: too late
            raise TimeoutError(f"no reply within {timeout} s")
        if not data:
            raise OSError("connection closed by server")
        return data

    def _check(self) -> None:
        """The watchdog: end the waiting read past its deadline, else re-arm or disarm."""
        self._watch = None
        since, timeout = self._since, self._timeout
        if since is None or timeout is None:
            return  # no read waits: the next read arms the watchdog again
        due = since + timeout
        if self._loop.time() < due:
            self._watch = self._loop.call_at(due, self._check)
            return
        self._expired = True
        self._reader.set_exception(TimeoutError(f"no reply within {timeout} s"))

    def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
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
