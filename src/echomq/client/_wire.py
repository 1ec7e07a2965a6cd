"""The bulk wire's pure core: RESP encoding, reply parsing, the connection target. No I/O.

redis-py's pipeline costs ~25 µs of client CPU per ``EVALSHA`` under asyncio (command
stack, per-argument encoder, one ``read_response`` with its own timeout context per
reply): the client, not the server, bounded bulk admission at about a quarter of the
server's limit (docs/decisions/0005-wire-fast-path.md). The bulk wire encodes a batch
of calls into one buffer and parses the replies with hiredis straight from the
connection: ~1.5 µs per call. Only bulk calls use it; single commands keep redis-py.

The wire is sans-I/O (after httpcore's h11 split): this module encodes requests
(:func:`pack_evalsha`, :func:`pack_command`) and decodes replies fed to it in any
pieces (:class:`ReplyParser`); the exchange that drives them is written once, for
asyncio, in :mod:`echomq.client._async.wire` and generated for blocking sockets into
:mod:`echomq.client._sync.wire`; the only hand-written I/O is the two small streams of
:mod:`echomq.client._stream`. ``tests/echomq/test_wire.py`` runs this core on canned bytes.

Plain TCP and unix sockets, with username/password and db, are supported; for any
other connection (TLS, credential providers) :func:`target_of` returns None and the
connector keeps redis-py's pipeline (the fallback, run by
``tests/echomq/test_fallback.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import hiredis
import redis
import redis.asyncio
from redis import exceptions as rex

__all__ = [
    "BROKEN",
    "NEED_DATA",
    "ReplyParser",
    "Target",
    "WireError",
    "WireTimeout",
    "broken",
    "check_hello",
    "pack_command",
    "pack_evalsha",
    "target_of",
]

READ_SIZE = 1 << 16
"""Bytes asked of the connection per read: one read holds ~10,000 small integer replies."""

# Failures of the connection itself (not of encoding, which raises DataError at once).
BROKEN = (OSError, TimeoutError, hiredis.ProtocolError, rex.ConnectionError, rex.TimeoutError)

try:  # redis-py's own mapping of error replies to exception classes (NOSCRIPT, ...)
    from redis._parsers.base import BaseParser

    _parse_error: Any = BaseParser.parse_error
except ImportError:  # pragma: no cover - older redis-py layouts

    def _parse_error(message: str) -> Exception:
        if message.startswith("NOSCRIPT "):
            return rex.NoScriptError(message[9:])
        return rex.ResponseError(message)


def _reply_error(message: str) -> Exception:
    """An error reply as redis-py types it; a server that wants a password refuses a
    large unauthenticated request with a protocol error, typed as the NOAUTH it means."""
    if "Protocol error: unauthenticated" in message[:40]:  # (after its "ERR ")
        return rex.AuthenticationError(f"NOAUTH Authentication required ({message})")
    return _parse_error(message)  # type: ignore[no-any-return]


class _NeedData:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA: Any = _NeedData()
"""What :meth:`ReplyParser.next` returns while a reply is incomplete. A sentinel of our
own: hiredis's default (``False``) is also the RESP3 reply ``#f``."""


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
    """``EVALSHA sha numkeys *keys *args`` as one RESP request.

    The exact types ``str``, ``bytes`` and ``int`` (nearly every key and argument) are
    encoded inline, without a call per argument: a drain's flush encodes ~7 per job
    (~25% of the encoding's CPU, docs/decisions/0025-direct-runs.md); anything else takes
    :func:`_arg` (subclasses, bytearray, memoryview, float; DataError for the rest)."""
    nk = b"%d" % len(keys)
    out = [b"*%d\r\n$7\r\nEVALSHA\r\n$40\r\n%b\r\n$%d\r\n%b\r\n" % (
        3 + len(keys) + len(args), sha.encode(), len(nk), nk)]
    append = out.append
    both: tuple[Sequence[Any], Sequence[Any]] = (keys, args)
    for seq in both:
        for value in seq:
            cls = type(value)
            if cls is str:
                data = value.encode()
            elif cls is bytes:
                data = value
            elif cls is int:
                data = b"%d" % value
            else:
                append(_arg(value))
                continue
            append(b"$%d\r\n%b\r\n" % (len(data), data))
    return b"".join(out)


def pack_command(*args: object) -> bytes:
    """Any command as one RESP request (an array of bulk strings)."""
    return b"*%d\r\n" % len(args) + b"".join(map(_arg, args))


class ReplyParser:
    """RESP2 and RESP3 replies from bytes fed in pieces of any size.

    An error reply is returned (never raised) as redis-py's own exception class for its
    code (``NoScriptError`` for NOSCRIPT, ``ResponseError`` with the ``EMQ…`` text), so
    the connector types it as it types redis-py's pipeline replies. Malformed bytes
    raise ``hiredis.ProtocolError`` (a broken connection: :data:`BROKEN`).
    """

    __slots__ = ("_reader", "gets")

    def __init__(self) -> None:
        self._reader = hiredis.Reader(replyError=_reply_error, notEnoughData=NEED_DATA)
        self.gets: Callable[[], Any] = self._reader.gets
        """:meth:`next` as the reader's own method: one C call per reply in a hot loop."""

    def feed(self, data: bytes) -> None:
        self._reader.feed(data)

    def next(self) -> Any:
        """The next whole reply, or :data:`NEED_DATA` until more bytes are fed."""
        return self._reader.gets()


class WireError(rex.ConnectionError):
    """The wire connection failed; ``answered`` holds the replies of completed flushes."""

    def __init__(self, message: str, answered: list[Any]) -> None:
        super().__init__(message)
        self.answered = answered


class WireTimeout(WireError, rex.TimeoutError):
    """The server did not answer within the socket timeout."""


def broken(exc: BaseException, answered: list[Any]) -> WireError:
    """The typed failure of a connection that broke after ``answered`` came back."""
    kind = WireTimeout if isinstance(exc, TimeoutError) else WireError
    return kind(f"wire connection failed: {exc!r}", answered)


@dataclass(frozen=True, slots=True)
class Target:
    """Where the wire connects: the same server, credentials and db as a redis-py client."""

    host: str | None
    port: int
    path: str | None
    username: str | None
    password: str | None
    db: int
    timeout: float | None

    def hello(self) -> list[bytes]:
        """The requests sent first on a new connection (AUTH, SELECT), maybe none."""
        out = []
        if self.password is not None:
            auth: tuple[str, ...] = (self.password,) if self.username is None else (
                self.username, self.password)
            out.append(pack_command("AUTH", *auth))
        if self.db:
            out.append(pack_command("SELECT", self.db))
        return out


def check_hello(replies: Sequence[Any]) -> None:
    """Raise if the server refused a hello request (wrong credentials, no such db)."""
    for reply in replies:
        if isinstance(reply, Exception):
            raise rex.AuthenticationError(str(reply))


_PLAIN = (redis.asyncio.connection.Connection, redis.connection.Connection)
_UNIX = (redis.asyncio.connection.UnixDomainSocketConnection,
         redis.connection.UnixDomainSocketConnection)


def target_of(client: Any) -> Target | None:
    """The target of a redis-py client's pool, or None where the wire does not apply:
    TLS (``rediss://``), a credential provider, or any other connection class."""
    pool = getattr(client, "connection_pool", None)
    if pool is None:
        return None
    kw = pool.connection_kwargs
    cls = pool.connection_class
    if kw.get("credential_provider") is not None or cls not in (*_PLAIN, *_UNIX):
        return None
    return Target(
        host=kw.get("host", "localhost") if cls in _PLAIN else None,
        port=int(kw.get("port", 6379)),
        path=kw.get("path") if cls in _UNIX else None,
        username=kw.get("username"),
        password=kw.get("password"),
        db=int(kw.get("db", 0) or 0),
        timeout=kw.get("socket_timeout"),
    )
