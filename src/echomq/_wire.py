"""A hand-encoded RESP path for bulk script calls (docs/decisions/0005-wire-fast-path.md).

redis-py's pipeline costs ~25 µs of client CPU per ``EVALSHA`` under asyncio (command
stack, per-argument encoder, one ``read_response`` with its own timeout context per
reply): the client, not the server, bounded bulk admission at about a quarter of the
server's limit. Here a batch of calls is encoded into one buffer and sent on a
dedicated connection; the replies are parsed by hiredis straight from the socket:
~1.5 µs per call. Only bulk calls use it; single commands keep redis-py.

Guarantees, the same as the pipeline it replaces:

* one reply per call, in input order; a server error reply is returned in its place
  (a ``ResponseError``, ``NoScriptError`` for NOSCRIPT, built by redis-py's own error
  parser) and never raised;
* at most two flushes in flight, so the replies of flush *k* are read while the server
  runs flush *k+1* (both server and client stay busy);
* a broken or silent connection is closed and raised as redis-py's ``ConnectionError``
  or ``TimeoutError`` (transient for the connector's retry budget) carrying, in
  :attr:`WireError.answered`, the replies of the flushes fully answered before the
  failure: only the rest is sent again.

Plain TCP and unix sockets, with username/password and db, are supported; for any
other connection (TLS, credential providers) :func:`attach` returns None and the
connector keeps redis-py's pipeline.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import hiredis
import redis
import redis.asyncio
from redis import exceptions as rex

__all__ = ["AsyncWire", "SyncWire", "WireError", "attach", "pack_evalsha"]

_READ = 1 << 16
# Failures of the connection itself (not of encoding, which raises DataError at once).
_BROKEN = (OSError, TimeoutError, hiredis.ProtocolError, rex.ConnectionError, rex.TimeoutError)
try:  # redis-py's own mapping of error replies to exception classes (NOSCRIPT, ...)
    from redis._parsers.base import BaseParser

    _parse_error: Any = BaseParser.parse_error
except ImportError:  # pragma: no cover - older redis-py layouts

    def _parse_error(message: str) -> Exception:
        if message.startswith("NOSCRIPT "):
            return rex.NoScriptError(message[9:])
        return rex.ResponseError(message)


def _arg(value: object) -> bytes:
    if isinstance(value, bytes):
        return b"$%d\r\n%b\r\n" % (len(value), value)
    if isinstance(value, str):
        data = value.encode()
        return b"$%d\r\n%b\r\n" % (len(data), data)
    if isinstance(value, int) and not isinstance(value, bool):
        data = b"%d" % value
        return b"$%d\r\n%b\r\n" % (len(data), data)
    if isinstance(value, bytearray | memoryview):
        return _arg(bytes(value))
    if isinstance(value, float):
        return _arg(repr(value))
    raise rex.DataError(f"invalid argument of type {type(value).__name__}; bytes, str or int expected")


def pack_evalsha(sha: str, keys: Sequence[object], args: Sequence[object]) -> bytes:
    """``EVALSHA sha numkeys *keys *args`` as one RESP request."""
    nk = b"%d" % len(keys)
    head = b"*%d\r\n$7\r\nEVALSHA\r\n$40\r\n%b\r\n$%d\r\n%b\r\n" % (
        3 + len(keys) + len(args), sha.encode(), len(nk), nk)
    return head + b"".join(map(_arg, keys)) + b"".join(map(_arg, args))


def pack_command(*args: object) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(map(_arg, args))


class WireError(rex.ConnectionError):
    """The wire connection failed; ``answered`` holds the replies of completed flushes."""

    def __init__(self, message: str, answered: list[Any]) -> None:
        super().__init__(message)
        self.answered = answered


class WireTimeout(WireError, rex.TimeoutError):
    """The server did not answer within the socket timeout."""


@dataclass(frozen=True, slots=True)
class _Target:
    host: str | None
    port: int
    path: str | None
    username: str | None
    password: str | None
    db: int
    timeout: float | None

    def hello(self) -> list[bytes]:
        out = []
        if self.password is not None:
            auth: tuple[str, ...] = (self.password,) if self.username is None else (
                self.username, self.password)
            out.append(pack_command("AUTH", *auth))
        if self.db:
            out.append(pack_command("SELECT", self.db))
        return out


def _target(client: Any) -> _Target | None:
    pool = getattr(client, "connection_pool", None)
    if pool is None:
        return None
    kw = pool.connection_kwargs
    cls = pool.connection_class
    plain = (redis.asyncio.connection.Connection, redis.connection.Connection)
    unix = (redis.asyncio.connection.UnixDomainSocketConnection,
            redis.connection.UnixDomainSocketConnection)
    if kw.get("credential_provider") is not None or cls not in (*plain, *unix):
        return None
    return _Target(
        host=kw.get("host", "localhost") if cls in plain else None,
        port=int(kw.get("port", 6379)),
        path=kw.get("path") if cls in unix else None,
        username=kw.get("username"),
        password=kw.get("password"),
        db=int(kw.get("db", 0) or 0),
        timeout=kw.get("socket_timeout"),
    )


def attach(client: Any) -> AsyncWire | SyncWire | None:
    """A wire beside ``client`` (same server, credentials and db), or None if unsupported."""
    target = _target(client)
    if target is None:
        return None
    if isinstance(client, redis.asyncio.Redis):
        return AsyncWire(target)
    if isinstance(client, redis.Redis):
        return SyncWire(target)
    return None


def _check_hello(reader: hiredis.Reader, replies: list[Any]) -> None:
    for reply in replies:
        if isinstance(reply, Exception):
            raise rex.AuthenticationError(str(reply))


class AsyncWire:
    """One dedicated asyncio connection; calls are serialized by a lock."""

    def __init__(self, target: _Target) -> None:
        self.target = target
        self._lock = asyncio.Lock()
        self._io: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._parser = hiredis.Reader(replyError=_parse_error)

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        t = self.target
        async with asyncio.timeout(t.timeout):
            if t.path is not None:
                io = await asyncio.open_unix_connection(t.path, limit=_READ)
            else:
                io = await asyncio.open_connection(t.host, t.port, limit=_READ)
            self._parser = hiredis.Reader(replyError=_parse_error)
            hello = t.hello()
            if hello:
                try:
                    io[1].write(b"".join(hello))
                    _check_hello(self._parser, await self._read(io[0], len(hello)))
                except BaseException:
                    io[1].close()  # refused credentials: no transport left open
                    raise
        return io

    async def _read(self, reader: asyncio.StreamReader, count: int) -> list[Any]:
        parser = self._parser
        out: list[Any] = []
        while len(out) < count:
            reply = parser.gets()
            if reply is False:
                data = await reader.read(_READ)
                if not data:
                    raise OSError("connection closed by server")
                parser.feed(data)
            else:
                out.append(reply)
        return out

    async def run(self, flushes: Iterable[tuple[bytes, int]]) -> list[Any]:
        """Send ``(buffer, number of calls)`` flushes, two in flight; all replies in order.

        ``flushes`` may be a generator: flush *k+1* is encoded while the server runs *k*.
        """
        answered: list[Any] = []
        async with self._lock:
            try:
                if self._io is None:
                    self._io = await self._connect()
                reader, writer = self._io
                it = iter(flushes)
                ahead = next(it, None)
                if ahead is not None:
                    writer.write(ahead[0])
                while ahead is not None:
                    count = ahead[1]
                    ahead = next(it, None)
                    if ahead is not None:
                        writer.write(ahead[0])
                    async with asyncio.timeout(self.target.timeout):
                        await writer.drain()
                        answered += await self._read(reader, count)
            except _BROKEN as exc:
                await self.aclose()
                kind = WireTimeout if isinstance(exc, TimeoutError) else WireError
                raise kind(f"wire connection failed: {exc!r}", answered) from exc
            except BaseException:
                await self.aclose()  # cancelled or misused mid-exchange: replies out of step
                raise
        return answered

    async def aclose(self) -> None:
        io, self._io = self._io, None
        if io is not None:
            io[1].close()
            with contextlib.suppress(Exception):
                await io[1].wait_closed()


class _SyncConn:
    """One blocking socket with its reply parser; used by one thread at a time."""

    def __init__(self, target: _Target) -> None:
        self.target = target
        self.sock = self._connect()

    def _connect(self) -> socket.socket:
        t = self.target
        if t.path is not None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(t.timeout)
            try:
                sock.connect(t.path)
            except BaseException:
                sock.close()
                raise
        else:
            sock = socket.create_connection((t.host or "localhost", t.port), timeout=t.timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.parser = hiredis.Reader(replyError=_parse_error)
        hello = t.hello()
        if hello:
            try:
                sock.sendall(b"".join(hello))
                _check_hello(self.parser, self._read(sock, len(hello)))
            except BaseException:
                sock.close()
                raise
        return sock

    def _read(self, sock: socket.socket, count: int) -> list[Any]:
        parser = self.parser
        out: list[Any] = []
        while len(out) < count:
            reply = parser.gets()
            if reply is False:
                data = sock.recv(_READ)
                if not data:
                    raise OSError("connection closed by server")
                parser.feed(data)
            else:
                out.append(reply)
        return out

    def run(self, flushes: Iterable[tuple[bytes, int]], answered: list[Any]) -> None:
        sock = self.sock
        it = iter(flushes)
        ahead = next(it, None)
        if ahead is not None:
            sock.sendall(ahead[0])
        while ahead is not None:
            count = ahead[1]
            ahead = next(it, None)
            if ahead is not None:
                sock.sendall(ahead[0])
            answered += self._read(sock, count)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


class SyncWire:
    """Blocking sockets for bulk calls, safe to share between threads: each call takes an
    idle connection (or opens one) and gives it back when its replies are all read, so
    concurrent callers never interleave on one socket."""

    def __init__(self, target: _Target) -> None:
        self.target = target
        self._lock = threading.Lock()
        self._idle: list[_SyncConn] = []
        self._epoch = 0  # bumped by close(): connections of an older epoch are not kept

    def run(self, flushes: Iterable[tuple[bytes, int]]) -> list[Any]:
        """Send ``(buffer, number of calls)`` flushes, two in flight; all replies in order."""
        answered: list[Any] = []
        conn: _SyncConn | None = None
        with self._lock:
            epoch = self._epoch
            if self._idle:
                conn = self._idle.pop()
        try:
            if conn is None:
                conn = _SyncConn(self.target)
            conn.run(flushes, answered)
        except _BROKEN as exc:
            if conn is not None:
                conn.close()
            kind = WireTimeout if isinstance(exc, TimeoutError) else WireError
            raise kind(f"wire connection failed: {exc!r}", answered) from exc
        except BaseException:
            if conn is not None:
                conn.close()  # misused mid-exchange: replies out of step
            raise
        with self._lock:
            if epoch == self._epoch:
                self._idle.append(conn)
                conn = None
        if conn is not None:
            conn.close()
        return answered

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
            self._epoch += 1
        for conn in idle:
            conn.close()

    aclose = close
