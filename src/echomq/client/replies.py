"""What a worker does with each failure a server can answer (issue 20, docs/reliability.md).

:func:`classify` puts every exception a consumer can meet into one of four kinds:

=================  ===========================================  ==========================
kind               replies                                      the worker
=================  ===========================================  ==========================
``BACK_PRESSURE``  ``OOM`` (maxmemory), ``BUSY`` (a long         logs once per episode,
                   script)                                      backs off, retries
``TRANSIENT``      ``LOADING``, ``MISCONF``, ``READONLY``,      the same
                   ``TRYAGAIN``, ``CLUSTERDOWN``,
                   ``MASTERDOWN``, ``MOVED``/``ASK`` left over,
                   timeouts, lost or refused connections,
                   :class:`~echomq.core.errors.ServerUnavailable`
``CONFIGURATION``  ``NOPERM``, ``WRONGPASS``, ``NOAUTH``, the   stops with one line
                   protocol version fence (``EMQVERSION``)      naming the fix
``FAULT``          anything else (a bug, an unexpected reply)   stops, with the error
=================  ===========================================  ==========================

The reply code is read from the exception's type (redis-py strips the code of the
replies it maps, e.g. ``OutOfMemoryError``), from EchoMQ's own typed errors, or from the
first word of the message, and through ``__cause__`` when one error wraps another.
:class:`Episodes` turns a stream of refusals into log lines: one when an episode starts
(or its reason changes), one when the server answers again.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from dataclasses import dataclass

from redis import exceptions as rex

from echomq.client._edge import no_auth
from echomq.core.backoff import BackoffDelays
from echomq.core.errors import ProtocolVersionError, ServerUnavailable

__all__ = ["FIXES", "Episodes", "Kind", "Refusal", "classify", "reply_code"]


class Kind(enum.Enum):
    BACK_PRESSURE = "back-pressure"
    TRANSIENT = "transient"
    CONFIGURATION = "configuration"
    FAULT = "fault"

    @property
    def retry(self) -> bool:
        """True when waiting and trying again is the answer."""
        return self in (Kind.BACK_PRESSURE, Kind.TRANSIENT)


_KINDS: dict[str, Kind] = {
    "OOM": Kind.BACK_PRESSURE,
    "BUSY": Kind.BACK_PRESSURE,
    "LOADING": Kind.TRANSIENT,
    "MISCONF": Kind.TRANSIENT,
    "READONLY": Kind.TRANSIENT,
    "TRYAGAIN": Kind.TRANSIENT,
    "CLUSTERDOWN": Kind.TRANSIENT,
    "MASTERDOWN": Kind.TRANSIENT,
    "MOVED": Kind.TRANSIENT,
    "ASK": Kind.TRANSIENT,
    "UNBLOCKED": Kind.TRANSIENT,
    "TIMEOUT": Kind.TRANSIENT,
    "CONNECTION": Kind.TRANSIENT,
    "UNAVAILABLE": Kind.TRANSIENT,
    "NOPERM": Kind.CONFIGURATION,
    "WRONGPASS": Kind.CONFIGURATION,
    "NOAUTH": Kind.CONFIGURATION,
    "EMQVERSION": Kind.CONFIGURATION,
}

FIXES: dict[str, str] = {
    "OOM": "the server is at maxmemory: admissions wait while workers drain",
    "BUSY": "a long script holds the server (busy-reply-threshold): waiting for it to end",
    "LOADING": "the server is loading its data set after a restart",
    "MISCONF": "the server cannot persist (stop-writes-on-bgsave-error): check its disk",
    "READONLY": "the node is a replica now (failover): waiting for the new primary",
    "TRYAGAIN": "a slot is being migrated: trying again",
    "CLUSTERDOWN": "the cluster does not serve the slot (failover or partition)",
    "MASTERDOWN": "the replica lost its primary",
    "MOVED": "the slot moved: re-reading the slot map",
    "ASK": "the slot is migrating: re-reading the slot map",
    "UNBLOCKED": "a blocked call was unblocked by the server",
    "TIMEOUT": "the server did not answer in time",
    "CONNECTION": "the connection was lost or refused",
    "UNAVAILABLE": "the server stayed unreachable for the connector's retry budget",
    "NOPERM": ("the server's ACL user may not run a command or touch a key the queue needs: "
               "grant it (+@read +@write +@scripting +@pubsub, keys ~emq:*, shard channels "
               "&emq:*) with ACL SETUSER, or connect as a user that has them"),
    "WRONGPASS": ("the username or password in the server URL is wrong: fix the URL "
                  "(redis://user:password@host:port)"),
    "NOAUTH": ("the server requires a password: put it in the URL "
               "(redis://:password@host:port or redis://user:password@host:port)"),
    "EMQVERSION": ("the queue was written by another EchoMQ protocol major version: run a "
                   "matching echomq release, or use a new queue name"),
}

_TYPES: tuple[tuple[type[BaseException], str], ...] = (
    # Order matters: redis-py's AuthenticationError and BusyLoadingError are ConnectionErrors.
    (ProtocolVersionError, "EMQVERSION"),
    (ServerUnavailable, "UNAVAILABLE"),
    (rex.NoPermissionError, "NOPERM"),
    (rex.AuthenticationError, "WRONGPASS"),  # refined from the message below (NOAUTH)
    (rex.AuthorizationError, "NOPERM"),
    (rex.OutOfMemoryError, "OOM"),
    (rex.BusyLoadingError, "LOADING"),
    (rex.ReadOnlyError, "READONLY"),
    (rex.TryAgainError, "TRYAGAIN"),
    (rex.MasterDownError, "MASTERDOWN"),
    (rex.ClusterDownError, "CLUSTERDOWN"),
    (rex.MovedError, "MOVED"),
    (rex.AskError, "ASK"),
    (rex.TimeoutError, "TIMEOUT"),
    (TimeoutError, "TIMEOUT"),
    (rex.ConnectionError, "CONNECTION"),
    (ConnectionError, "CONNECTION"),
    (OSError, "CONNECTION"),
)


def _code_of(exc: BaseException) -> str | None:
    code = getattr(exc, "code", None)  # EchoMQ's typed replies keep their code
    if isinstance(code, str) and code in _KINDS:
        return code
    text = str(exc)
    first = text.split(" ", 1)[0]
    if first in _KINDS and first not in _GENERIC:
        return first
    if "OutOfMemoryError" in text or ("maxmemory" in text and "not allowed" in text):
        return "OOM"  # redis-py's own text for an OOM reply whose code it stripped
    for kind, name in _TYPES:
        if isinstance(exc, kind):
            if name == "WRONGPASS" and no_auth(text):
                return "NOAUTH"
            return name
    return None


_GENERIC = frozenset({"TIMEOUT", "CONNECTION", "UNAVAILABLE"})


def reply_code(exc: BaseException) -> str | None:
    """The server's reply code behind ``exc`` (``OOM``, ``BUSY``, ...) or None.

    Follows ``__cause__``/``__context__``: a configuration code anywhere in the chain wins
    (credentials refused while connecting surface as a lost connection), then the most
    specific code (``LOADING`` behind ``ServerUnavailable``), then a generic one.
    """
    codes: list[str] = []
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        code = _code_of(cur)
        if code is not None:
            codes.append(code)
        cur = cur.__cause__ or cur.__context__
    for code in codes:
        if _KINDS[code] is Kind.CONFIGURATION:
            return code
    specific = [c for c in codes if c not in _GENERIC]
    return (specific or codes)[0] if codes else None


@dataclass(frozen=True, slots=True)
class Refusal:
    """One classified failure: its kind, the reply code and what it means or how to fix it."""

    kind: Kind
    code: str
    detail: str

    def line(self) -> str:
        return f"{self.code}: {self.detail}"


def classify(exc: BaseException) -> Refusal:
    """The kind of ``exc`` for a worker (see the module's table)."""
    code = reply_code(exc)
    if code is None:
        return Refusal(Kind.FAULT, type(exc).__name__, f"{exc}"[:300])
    return Refusal(_KINDS[code], code, FIXES[code])


class Episodes:
    """One line per episode of refusals; counts episodes per reply code.

    An episode starts with the first retryable refusal (or one whose code differs from
    the current episode's) and ends with the next call the server answers. Back-off
    grows from ``first_s`` to ``cap_s`` within an episode.
    """

    def __init__(self, name: str, log: logging.Logger, *, first_s: float = 0.05,
                 cap_s: float = 2.0) -> None:
        self.name, self.log = name, log
        self.first_s, self.cap_s = first_s, cap_s
        self.current: Refusal | None = None
        self.started = 0.0
        self.refusals = 0
        self.episodes = 0
        self.by_code: dict[str, int] = {}
        self._delays = BackoffDelays(first_s, cap_s)

    def refused(self, refusal: Refusal, where: str) -> float:
        """Record one retryable refusal; returns how long to back off."""
        self.refusals += 1
        if self.current is None or self.current.code != refusal.code:
            self.current, self.started = refusal, time.monotonic()
            self.episodes += 1
            self.by_code[refusal.code] = self.by_code.get(refusal.code, 0) + 1
            self._delays.reset()
            self.log.warning("%s: server refused %s (%s); backing off and retrying until it "
                             "answers", self.name, where, refusal.line())
        return next(self._delays)

    def answered(self) -> None:
        """The server answered a call: the episode (if any) is over."""
        if self.current is not None:
            self.log.warning("%s: server answers again after %.1fs of %s", self.name,
                             time.monotonic() - self.started, self.current.code)
            self.current = None
            self._delays.reset()

    async def pause(self, refusal: Refusal, where: str, stop: asyncio.Event) -> None:
        """:meth:`refused`, then wait the back-off (or until ``stop`` is set)."""
        delay = self.refused(refusal, where)
        if stop.is_set():
            return
        try:
            async with asyncio.timeout(delay):
                await stop.wait()
        except TimeoutError:
            pass
