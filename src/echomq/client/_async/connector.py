"""The connector: scripts EVALSHA-first, pipelines, plain commands, one retry budget.

* Every script call goes out through one path, :meth:`AsyncConnector._send`: calls
  (and optional plain reads after them) in flushes, one reply per call in place. That
  path, and only that path, recovers ``NOSCRIPT`` (the cache is per server and is lost
  on restart, failover and ``SCRIPT FLUSH``): the calls that answered it did not run, so
  their scripts are loaded with ``SCRIPT LOAD`` and only those calls are sent again.
* Transient failures (connection refused or reset, timeouts, LOADING, READONLY,
  TRYAGAIN, CLUSTERDOWN) are retried with capped exponential backoff until the retry
  budget (10 s by default) is spent; then :class:`ServerUnavailable` is raised. Every
  EchoMQ script is safe to resend: admission refuses duplicates, transitions are fenced.
* Public methods run inside :func:`echomq.client._edge.mapped` and pipelines hand back error
  replies through :func:`echomq.client._edge.reply`: no ``redis`` exception reaches a caller;
  error replies are typed by their code (:data:`echomq.protocol.ERROR_CODES`).
* Safe to share: between tasks (async) and between threads (the blocking copy): the
  client's pool gives each call its own connection, the bulk wire keeps a pool too.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator, Sequence
from typing import Any

import redis.asyncio as redis_client
from redis import exceptions as rex

from echomq.client import _edge, _wire
from echomq.client._async.seam import Read, WakeSubscription
from echomq.client._async.wire import AsyncWire
from echomq.core.backoff import BackoffDelays
from echomq.core.errors import ServerUnavailable
from echomq.protocol import Call
from echomq.protocol.scripts import Script

__all__ = ["AsyncConnector", "Call", "Read", "WakeSubscription", "is_transient"]



def _pack(read: Read) -> bytes:
    if isinstance(read, Call):
        return _wire.pack_evalsha(read.script.sha, read.keys, read.args)
    return _wire.pack_command(*read)


def _argv(read: Read) -> Sequence[Any]:
    if isinstance(read, Call):
        return ["EVALSHA", read.script.sha, len(read.keys), *read.keys, *read.args]
    return read

_TRANSIENT = (
    rex.ConnectionError,  # includes BusyLoadingError (LOADING)
    rex.TimeoutError,
    rex.ReadOnlyError,
    rex.TryAgainError,
    rex.ClusterDownError,
)
_NOSCRIPT_ROUNDS = 3  # a script flushed again between load and resend, twice: give up


def is_transient(exc: BaseException) -> bool:
    """True for failures that a later attempt can outlive (restart, failover, loading).

    A refused password (WRONGPASS, NOAUTH) is not one, though redis-py raises it as a
    ConnectionError: no retry fixes a URL, so the caller hears it at once."""
    if isinstance(exc, rex.AuthenticationError | rex.AuthorizationError):
        return False
    if isinstance(exc, _TRANSIENT):
        return True
    return isinstance(exc, rex.ResponseError) and str(exc).startswith(
        ("LOADING", "READONLY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN")
    )


def _unrun(reply: Any) -> bool:
    """A reply that says its call did not run, or may be outlived: send the call again."""
    return isinstance(reply, rex.NoScriptError) or (
        isinstance(reply, Exception) and is_transient(reply))


def check_calls(calls: Sequence[Call]) -> None:
    """Refuse a call whose shape does not fit its script's contract, before any I/O."""
    for call in calls:
        if call.wire is None and call.encode is None:  # built by echomq.protocol.encoded: its shape holds
            call.script.check(len(call.keys), len(call.args))


class AsyncConnector:
    """One Valkey endpoint (a URL: ``redis://``, ``rediss://`` or ``unix://``); a
    :class:`~echomq.client._async.seam.ScriptConnector`."""

    def __init__(self, client: Any, *, retry_budget_s: float = 10.0) -> None:
        self.client = client
        self.retry_budget_s = retry_budget_s
        # Bulk script calls go over a hand-encoded wire (docs/decisions/0005); None: redis-py.
        self.wire: AsyncWire | None = AsyncWire.attach(client)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        retry_budget_s: float = 10.0,
        socket_timeout: float | None = 5.0,
        max_connections: int | None = None,
    ) -> AsyncConnector:
        """Connect lazily to ``url`` (TCP, TLS, unix socket, username and password in the URL)."""
        with _edge.mapped():
            client = redis_client.Redis.from_url(
                url,
                decode_responses=False,
                socket_timeout=socket_timeout,
                socket_connect_timeout=socket_timeout,
                max_connections=max_connections,
            )
        return cls(client, retry_budget_s=retry_budget_s)

    async def aclose(self) -> None:
        """Close every connection. A server that died or stalls cannot confirm a close:
        redis-py then raises after its connect timeout (``Timed out closing connection``),
        with the socket already closed on this side; that is not a failure of the close."""
        with _edge.mapped():
            if self.wire is not None:
                await self.wire.aclose()
            with contextlib.suppress(rex.TimeoutError, rex.ConnectionError, OSError):
                await self.client.aclose()

    async def __aenter__(self) -> AsyncConnector:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ------------------------------------------------------------ retries
    async def _retrying(self, op: Any, *args: Any) -> Any:
        deadline = time.monotonic() + self.retry_budget_s
        delays = BackoffDelays(0.02, 1.0, jitter=(0.5, 1.5))
        while True:
            try:
                return await op(*args)
            except Exception as exc:
                if not is_transient(exc):
                    raise
                if time.monotonic() + delays.step > deadline:
                    raise ServerUnavailable(
                        f"server unavailable for {self.retry_budget_s}s: {exc!r}"
                    ) from exc
                await asyncio.sleep(next(delays))

    # ------------------------------------------------------------ the one send path
    async def _transmit(self, calls: Sequence[Call], reads: Sequence[Read], flush: int,
                        asking: bool, bulk: bool, out: list[Any]) -> None:
        """Send ``calls`` in flushes of ``flush``, then ``reads``; append raw replies to
        ``out`` (errors in place). On a broken connection the replies of the flushes
        answered before it are in ``out`` and the failure is raised."""
        if self.wire is not None and bulk and not asking:
            def flushes() -> Iterator[tuple[bytes, int]]:
                for i in range(0, max(len(calls), 1), flush):
                    chunk = calls[i : i + flush]
                    tail = reads if i + flush >= len(calls) else ()
                    buf = b"".join([*(c.request() or _wire.pack_evalsha(c.script.sha, c.keys, c.args)
                                      for c in chunk),
                                    *(_pack(r) for r in tail)])
                    yield buf, len(chunk) + len(tail)

            try:
                out += await self.wire.run(flushes())
            except _wire.WireError as exc:
                out += exc.answered
                raise
            return
        if len(calls) == 1 and not reads and not asking:
            one = calls[0]
            try:
                out.append(await self.client.execute_command(
                    "EVALSHA", one.script.sha, len(one.keys), *one.keys, *one.args))
            except rex.ResponseError as exc:
                out.append(exc)
            return
        for i in range(0, max(len(calls), 1), flush):
            pipe = self.client.pipeline(transaction=False)
            chunk = calls[i : i + flush]
            tail = reads if i + flush >= len(calls) else ()
            for call in chunk:
                if asking:
                    pipe.execute_command("ASKING")
                pipe.execute_command("EVALSHA", call.script.sha, len(call.keys), *call.keys,
                                     *call.args)
            for read in tail:
                if asking:
                    pipe.execute_command("ASKING")
                pipe.execute_command(*_argv(read))
            got: list[Any] = await pipe.execute(raise_on_error=False)
            out += got[1::2] if asking else got

    async def _send(self, calls: Sequence[Call], reads: Sequence[Read], flush: int | None,
                    asking: bool, bulk: bool, out: list[Any]) -> list[list[Any]]:
        """One attempt at ``calls`` then ``reads``; raw replies, errors in place.

        ``out`` carries the call replies across attempts: a call is sent when it has no
        reply yet, or when its reply says it did not run (NOSCRIPT) or may be outlived (a
        transient error reply); a call that ran is never sent again. The return value
        holds the read replies of each round: a NOSCRIPT round sends the reads again, so
        they see the effects of every call. A transient error reply is raised after the
        round, so the retry budget decides whether to try again.
        """
        todo = [i for i, v in enumerate(out) if _unrun(v)] + list(range(len(out), len(calls)))
        step = flush or max(len(todo), 1)
        rounds: list[list[Any]] = []
        for _ in range(_NOSCRIPT_ROUNDS + 1):
            got: list[Any] = []
            try:
                # The first attempt sends every call: the batch itself.
                batch = calls if not out and len(todo) == len(calls) else [calls[i] for i in todo]
                await self._transmit(batch, reads, step, asking, bulk, got)
            finally:  # keep what was answered, even when the connection broke part way
                if not out:  # todo is 0, 1, 2, ...: the replies in order
                    out += got[: len(todo)]
                else:
                    for i, value in zip(todo, got[: len(todo)], strict=False):
                        if i < len(out):
                            out[i] = value
                        else:
                            out.append(value)  # todo ascends past len(out): in order
            rounds.append(got[len(todo):])
            todo = [i for i in todo if isinstance(out[i], rex.NoScriptError)]
            lost = [r.script for r, g in zip(reads, rounds[-1], strict=True)
                    if isinstance(g, rex.NoScriptError) and isinstance(r, Call)]
            if not todo and not lost:
                break
            # Those calls did not run: load each of their scripts once, send only them
            # (and the reads) again.
            for script in {s.sha: s for s in [*(calls[i].script for i in todo), *lost]}.values():
                await self.client.execute_command("SCRIPT", "LOAD", script.source)
        for value in [*out, *rounds[-1]]:
            if isinstance(value, Exception) and is_transient(value):
                raise value
        return rounds

    # ------------------------------------------------------------ raw (cluster uses these)
    async def _command(self, *args: Any) -> Any:
        return await self._retrying(self.client.execute_command, *args)

    async def _eval(
        self, script: Script, keys: Sequence[Any], args: Sequence[Any], request: bytes | None = None,
    ) -> Any:
        wire = self.wire
        if wire is not None:
            # One call over the bulk wire, its request sent as its builder encoded it, with
            # none of the general path's bookkeeping: a single call's own client path is on
            # the admission-to-handler latency (decisions 0026, 0050). What the general path
            # would send again (NOSCRIPT, a transient error reply, a broken connection) goes
            # that way below, from its first attempt: a call that may have run is sent
            # again, as any retry of the general path sends it (scripts are fenced or
            # answer a resend by their call token).
            try:
                reply = await wire.call(request or _wire.pack_evalsha(script.sha, keys, args))
            except _wire.WireError:
                pass
            else:
                if not _unrun(reply):
                    if isinstance(reply, Exception):
                        raise reply
                    return reply
        out: list[Any] = []
        await self._retrying(self._send, [Call(script, keys, args)], (), None, False, True, out)
        if isinstance(out[0], Exception):
            raise out[0]
        return out[0]

    async def _pipeline(self, calls: Sequence[Call], flush: int | None = None) -> list[Any]:
        out: list[Any] = []
        if calls:
            await self._retrying(self._send, calls, (), flush, False, True, out)
        return out

    async def _flush(self, calls: Sequence[Call], reads: Sequence[Read]) -> list[Any]:
        out: list[Any] = []
        rounds: list[list[Any]] = await self._retrying(self._send, calls, reads, None, False,
                                                       True, out)
        return out + rounds[-1]

    async def _pipeline_wait(self, calls: Sequence[Call], replicas: int,
                             timeout_ms: int) -> tuple[list[Any], list[int]]:
        # WAIT counts the replicas that acknowledged *this connection's* writes, so it
        # follows the calls on their connection; after a NOSCRIPT round each WAIT vouches
        # for its round's writes, hence the least count of all rounds.
        out: list[Any] = []
        rounds = await self._retrying(self._send, calls, [("WAIT", replicas, timeout_ms)], None,
                                      False, True, out)
        counts = []
        for (count,) in rounds:
            if isinstance(count, Exception):
                if "replica" not in str(count).lower():
                    raise count
                # The node turned replica under us (a failover): its replies to the calls
                # redirect them, and it vouches for no write; a write it took counts as
                # acknowledged by no replica (NotDurable), never as durable.
                count = 0
            counts.append(int(count))
        return out, [min(counts)] * len(calls)

    # ------------------------------------------------------------ public
    async def command(self, *args: Any) -> Any:
        """One plain command, with the retry budget."""
        with _edge.mapped():
            return await self._command(*args)

    async def load(self, script: Script) -> None:
        """``SCRIPT LOAD`` one script (the server's cache is per node)."""
        await self.command("SCRIPT", "LOAD", script.source)

    async def eval(self, script: Script, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        """Run one script EVALSHA-first; an error reply is raised as its EchoMQ exception."""
        script.check(len(keys), len(args))
        with _edge.mapped():
            return await self._eval(script, keys, args)

    async def run(self, call: Call) -> Any:
        """Run one :class:`Call`: :meth:`eval` of its script, KEYS and ARGV (over the bulk
        wire, the request its builder encoded, when it did)."""
        call.script.check(len(call.keys), len(call.args))
        with _edge.mapped():
            return await self._eval(call.script, call.keys, call.args, call.request())

    async def pipeline(self, calls: Sequence[Call], *, flush: int | None = None) -> list[Any]:
        """Run many script calls pipelined; replies (or error replies) in input order.

        Calls go out in flushes of ``flush`` (all at once when None). If the connection
        fails, the calls not yet answered are sent again: callers' scripts are idempotent
        or fenced, and an admission's or finish's resend answers what its first send
        earned (its call token: docs/protocol.md, "Call tokens"). Error replies come back
        in place as EchoMQ exceptions, never raised for one item.
        """
        check_calls(calls)
        with _edge.mapped():
            return _edge.replies(await self._pipeline(calls, flush))

    async def flush(self, calls: Sequence[Call], reads: Sequence[Read] = ()) -> list[Any]:
        """Script calls, then plain read commands, in one flush: one round trip.

        Replies in order (calls, then reads); a script's error reply is returned in its
        place. On a transient failure the calls not yet answered and the reads are sent
        again (scripts are idempotent or fenced: a resent finish answers what its first send
        earned, by its call token; a resent claim skips what it already leased; such
        leases expire and are reaped, the
        at-least-once contract). The consumer's drain loop uses it to complete, claim and
        peek in one round trip (docs/decisions/0008-drain-path.md).
        """
        check_calls([*calls, *(r for r in reads if isinstance(r, Call))])
        if not calls and not reads:
            return []
        with _edge.mapped():
            return _edge.replies(await self._flush(calls, reads))

    async def pipeline_wait(self, calls: Sequence[Call], *, replicas: int,
                            timeout_ms: int) -> tuple[list[Any], list[int]]:
        """Run calls, then ``WAIT replicas timeout_ms`` on the connection that sent them.

        Returns the replies in input order and, per call, how many replicas acknowledged
        its writes within ``timeout_ms`` (durable admission, docs/cluster.md).
        """
        check_calls(calls)
        if not calls:
            return [], []
        with _edge.mapped():
            replies, acked = await self._pipeline_wait(calls, replicas, timeout_ms)
            return _edge.replies(replies), acked

    async def server_time_ms(self) -> int:
        """The server's clock in milliseconds (for tests and diagnostics, never for leases)."""
        sec, usec = await self.command("TIME")
        return int(sec) * 1000 + int(usec) // 1000

    async def wake_subscription(self, channel: str) -> Subscription:
        """``SSUBSCRIBE channel`` (a queue's wake channel); ``get_message``/``aclose``."""
        with _edge.mapped():
            pubsub = self.client.pubsub()
            await pubsub.ssubscribe(channel)
        return Subscription(pubsub)


class Subscription:
    """A shard-channel subscription whose failures are EchoMQ's (ServerUnavailable)."""

    def __init__(self, pubsub: Any) -> None:
        self.pubsub = pubsub

    async def get_message(self, ignore_subscribe_messages: bool = True, **wait: Any) -> Any:
        """As redis-py's ``get_message`` (``timeout=`` seconds to wait for a message)."""
        with _edge.mapped():
            return await self.pubsub.get_message(
                ignore_subscribe_messages=ignore_subscribe_messages, **wait)

    async def aclose(self) -> None:
        with _edge.mapped():
            await self.pubsub.aclose()
