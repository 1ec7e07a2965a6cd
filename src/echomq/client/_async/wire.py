"""The bulk wire's exchange: flushes of pre-encoded calls, replies in order.

Written once here for asyncio and generated into ``echomq/client/_sync/wire.py`` for blocking
sockets; the encoding and parsing are the pure :mod:`echomq.client._wire`, the I/O is one
small stream per flavour (:mod:`echomq.client._stream`). Guarantees, the same as the
redis-py pipeline it stands in for:

* one reply per call, in input order; a server error reply is returned in its place
  (a ``ResponseError``, ``NoScriptError`` for NOSCRIPT) and never raised;
* at most two flushes in flight, so the replies of flush *k* are read while the server
  runs flush *k+1* (both server and client stay busy);
* a broken or silent connection is closed and raised as :class:`echomq.client._wire.WireError`
  (a redis-py ``ConnectionError``; ``WireTimeout`` is also a ``TimeoutError``: transient
  for the connector's retry budget) carrying, in ``answered``, the replies of the
  flushes fully answered before the failure: only the rest is sent again;
* safe to share between tasks (threads, in the blocking copy): each run takes an idle
  connection (or opens one) and gives it back when its replies are all read, so two
  callers never interleave on one connection.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

import redis.asyncio as redis_client
from redis import exceptions as rex

from echomq.client._stream import AsyncStream
from echomq.client._wire import BROKEN, NEED_DATA, ReplyParser, Target, broken, check_hello, target_of

__all__ = ["AsyncWire"]

Flushes = Iterable[tuple[bytes, int]]
"""``(buffer, number of requests in it)``; may be a generator: flush *k+1* is encoded
while the server runs flush *k*."""


class _Connection:
    """One stream with its reply parser; used by one caller at a time."""

    def __init__(self, stream: AsyncStream) -> None:
        self.stream = stream
        self.parser = ReplyParser()

    async def read(self, count: int) -> list[Any]:
        """The next ``count`` replies, reading as many times as they take."""
        parser = self.parser
        gets = parser.gets
        out: list[Any] = []
        append = out.append
        while len(out) < count:
            reply = gets()
            if reply is NEED_DATA:
                parser.feed(await self.stream.read())
            else:
                append(reply)
        return out

    async def hello(self, target: Target) -> None:
        requests = target.hello()
        if requests:
            await self.stream.write(b"".join(requests))
            check_hello(await self.read(len(requests)))

    async def run(self, flushes: Flushes, answered: list[Any]) -> None:
        it = iter(flushes)
        ahead = next(it, None)
        if ahead is not None:
            await self.stream.write(ahead[0])
        while ahead is not None:
            count = ahead[1]
            ahead = next(it, None)
            if ahead is not None:
                await self.stream.write(ahead[0])
            answered += await self.read(count)

    def close(self) -> None:
        self.stream.close()


class AsyncWire:
    """Bulk calls to one server over connections of its own, beside a redis-py client."""

    def __init__(self, target: Target, *,
                 open_stream: Callable[[Target], Any] = AsyncStream.connect) -> None:
        self.target = target
        self._open_stream = open_stream
        self._lock = threading.Lock()  # guards the idle list only: never held across I/O
        self._idle: list[_Connection] = []
        self._epoch = 0  # bumped by aclose(): connections of an older epoch are not kept

    @classmethod
    def attach(cls, client: object) -> AsyncWire | None:
        """A wire beside ``client`` (same server, credentials and db), or None where the
        wire does not apply (TLS, a credential provider: redis-py's pipeline stays)."""
        target = target_of(client) if isinstance(client, redis_client.Redis) else None
        return None if target is None else cls(target)

    async def _connect(self) -> _Connection:
        conn = _Connection(await self._open_stream(self.target))
        try:
            await conn.hello(self.target)
        except BaseException:
            conn.close()  # refused credentials: no connection left open
            raise
        return conn

    async def run(self, flushes: Flushes) -> list[Any]:
        """Send the flushes, two in flight; every reply, in order."""
        answered: list[Any] = []
        conn, epoch = self._take()
        try:
            if conn is None:
                conn = await self._connect()
            await conn.run(flushes, answered)
        except BaseException as exc:
            raise self._failed(conn, exc, answered)  # noqa: B904 (its cause is set there)
        self._give_back(conn, epoch)
        return answered

    async def call(self, request: bytes) -> Any:
        """One request, its one reply (or error reply, returned): :meth:`run` of a single
        flush of one request, without the flushes' generator, the list of replies and the
        read loop (a single call's client path is on the idle hand-off's latency).
        Failures are :meth:`run`'s, with no reply answered."""
        conn, epoch = self._take()
        try:
            if conn is None:
                conn = await self._connect()
            stream, parser = conn.stream, conn.parser
            await stream.write(request)
            reply = parser.gets()
            while reply is NEED_DATA:
                parser.feed(await stream.read())
                reply = parser.gets()
        except BaseException as exc:
            raise self._failed(conn, exc, [])  # noqa: B904 (its cause is set there)
        self._give_back(conn, epoch)
        return reply

    def _take(self) -> tuple[_Connection | None, int]:
        """An idle connection (None: open one) and the epoch it is taken in."""
        with self._lock:
            return (self._idle.pop() if self._idle else None), self._epoch

    def _give_back(self, conn: _Connection, epoch: int) -> None:
        """Keep a connection whose replies were all read, unless aclose() came since."""
        with self._lock:
            if epoch == self._epoch:
                self._idle.append(conn)
                return
        conn.close()

    @staticmethod
    def _failed(conn: _Connection | None, exc: BaseException, answered: list[Any]) -> BaseException:
        """Close the connection of a failed exchange (its replies are out of step); what
        to raise: refused credentials as they are (a configuration error, not a broken
        connection), a broken connection as WireError carrying ``answered``, anything
        else (a cancel, a misuse mid-exchange) as it is."""
        if conn is not None:
            conn.close()
        if isinstance(exc, rex.AuthenticationError | rex.AuthorizationError) \
                or not isinstance(exc, BROKEN):
            return exc
        wire_exc = broken(exc, answered)
        wire_exc.__cause__ = exc
        return wire_exc

    async def aclose(self) -> None:
        """Close every idle connection; one in use is closed when its run ends."""
        with self._lock:
            idle, self._idle = self._idle, []
            self._epoch += 1
        for conn in idle:
            conn.close()
