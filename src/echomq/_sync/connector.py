# Generated from echomq/_async/connector.py by scripts/unasync_gen.py. Do not edit.
"""The connector: scripts EVALSHA-first, pipelines, plain commands, one retry budget.

* A script runs as ``EVALSHA``; on ``NOSCRIPT`` (the cache is per server and is lost
  on restart, failover and ``SCRIPT FLUSH``) it is loaded with ``SCRIPT LOAD`` and the
  same call is sent again. A call that answered NOSCRIPT did not run, so resending it
  is safe.
* A pipeline sends many script calls in one flush and returns one reply per call, in
  input order, with server errors in place (never raised for one item).
* Transient failures (connection refused or reset, timeouts, LOADING, READONLY,
  TRYAGAIN, CLUSTERDOWN) are retried with capped exponential backoff until the retry
  budget (10 s by default) is spent; then :class:`ServerUnavailable` is raised. Every
  EchoMQ script is safe to resend: admission refuses duplicates, transitions are fenced.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from typing import Any

import redis as redis_client
from redis import exceptions as rex

from echomq import _wire
from echomq.errors import ServerUnavailable
from echomq.scripts import Script

__all__ = ["Call", "Connector", "is_transient"]

Call = tuple[Script, Sequence[str | bytes], Sequence[str | bytes | int]]
"""One script call: the script, its KEYS, its ARGV."""

_TRANSIENT = (
    rex.ConnectionError,  # includes BusyLoadingError (LOADING)
    rex.TimeoutError,
    rex.ReadOnlyError,
    rex.TryAgainError,
    rex.ClusterDownError,
)


def is_transient(exc: BaseException) -> bool:
    """True for failures that a later attempt can outlive (restart, failover, loading)."""
    if isinstance(exc, _TRANSIENT):
        return True
    return isinstance(exc, rex.ResponseError) and str(exc).startswith(
        ("LOADING", "READONLY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN")
    )


class Connector:
    """One Valkey endpoint (a URL: ``redis://``, ``rediss://`` or ``unix://``)."""

    def __init__(self, client: Any, *, retry_budget_s: float = 10.0) -> None:
        self.client = client
        self.retry_budget_s = retry_budget_s
        self.fenced: set[str] = set()  # queues whose protocol version this connector checked
        # Bulk script calls go over a hand-encoded wire (docs/decisions/0005); None: redis-py.
        self.wire: Any = _wire.attach(client)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        retry_budget_s: float = 10.0,
        socket_timeout: float | None = 5.0,
        max_connections: int | None = None,
    ) -> Connector:
        """Connect lazily to ``url`` (TCP, TLS, unix socket, username and password in the URL)."""
        client = redis_client.Redis.from_url(
            url,
            decode_responses=False,
            socket_timeout=socket_timeout,
            socket_connect_timeout=socket_timeout,
            max_connections=max_connections,
        )
        return cls(client, retry_budget_s=retry_budget_s)

    def close(self) -> None:
        if self.wire is not None:
            self.wire.close()
        self.client.close()

    def __enter__(self) -> Connector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _retrying(self, op: Any, *args: Any) -> Any:
        deadline = time.monotonic() + self.retry_budget_s
        delay = 0.02
        while True:
            try:
                return op(*args)
            except Exception as exc:
                if not is_transient(exc):
                    raise
                if time.monotonic() + delay > deadline:
                    raise ServerUnavailable(
                        f"server unavailable for {self.retry_budget_s}s: {exc!r}"
                    ) from exc
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 1.0)

    def command(self, *args: Any) -> Any:
        """One plain command, with the retry budget."""
        return self._retrying(self.client.execute_command, *args)

    def load(self, script: Script) -> None:
        """``SCRIPT LOAD`` one script (the server's cache is per node)."""
        self.command("SCRIPT", "LOAD", script.source)

    def _eval_once(self, script: Script, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        try:
            return self.client.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
        except rex.NoScriptError:
            self.client.execute_command("SCRIPT", "LOAD", script.source)
            return self.client.execute_command(
                "EVALSHA", script.sha, len(keys), *keys, *args
            )

    def eval(self, script: Script, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        """Run one script EVALSHA-first; a server error reply is raised as ResponseError."""
        script.check(len(keys), len(args))
        return self._retrying(self._eval_once, script, keys, args)

    def _pipeline_once(self, calls: Sequence[Call]) -> list[Any]:
        pipe = self.client.pipeline(transaction=False)
        for script, keys, args in calls:
            pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
        replies: list[Any] = pipe.execute(raise_on_error=False)
        missing = [i for i, r in enumerate(replies) if isinstance(r, rex.NoScriptError)]
        if missing:
            # Those calls did not run. Load their scripts once and send only them again.
            for script in {calls[i][0].sha: calls[i][0] for i in missing}.values():
                self.client.execute_command("SCRIPT", "LOAD", script.source)
            again = self._pipeline_once([calls[i] for i in missing])
            for i, reply in zip(missing, again, strict=True):
                replies[i] = reply
        for reply in replies:
            if isinstance(reply, Exception) and is_transient(reply):
                raise reply
        return replies

    def _wire_once(self, calls: Sequence[Call], flush: int, out: list[Any]) -> None:
        # Resumes after the replies already in ``out`` (flushes answered before a failure).
        start = len(out)

        def flushes(todo: Sequence[Call]) -> Any:
            for i in range(0, len(todo), flush):
                chunk = todo[i : i + flush]
                yield b"".join([_wire.pack_evalsha(s.sha, k, a) for s, k, a in chunk]), len(chunk)

        try:
            out += self.wire.run(flushes(calls[start:]))
        except _wire.WireError as exc:
            out += exc.answered
            raise
        for _ in range(3):  # NOSCRIPT: those calls did not run; load once, send only them again
            missing = [i for i in range(start, len(out)) if isinstance(out[i], rex.NoScriptError)]
            if not missing:
                break
            for script in {calls[i][0].sha: calls[i][0] for i in missing}.values():
                self.client.execute_command("SCRIPT", "LOAD", script.source)
            again = self.wire.run(flushes([calls[i] for i in missing]))
            for i, reply in zip(missing, again, strict=True):
                out[i] = reply
        for i in range(start, len(out)):
            if isinstance(out[i], Exception) and is_transient(out[i]):
                reply = out[i]
                del out[i:]  # resend from here on
                raise reply

    def pipeline(self, calls: Sequence[Call], *, flush: int | None = None) -> list[Any]:
        """Run many script calls pipelined; replies (or error replies) in input order.

        Calls go out in flushes of ``flush`` (all at once when None). If the connection
        fails, the calls not yet answered are sent again: callers' scripts are idempotent
        or fenced, so a resent call reports duplicate or stale.
        """
        for script, keys, args in calls:
            script.check(len(keys), len(args))
        if not calls:
            return []
        step = flush or len(calls)
        out: list[Any] = []
        if self.wire is not None:
            self._retrying(self._wire_once, calls, step, out)
            return out
        for start in range(0, len(calls), step):
            out += self._retrying(self._pipeline_once, calls[start : start + step])
        return out

    def _flush_once(self, calls: Sequence[Call], reads: Sequence[Sequence[Any]],
                          depth: int = 0) -> list[Any]:
        if self.wire is None:
            pipe = self.client.pipeline(transaction=False)
            for script, keys, args in calls:
                pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
            for read in reads:
                pipe.execute_command(*read)
            replies: list[Any] = pipe.execute(raise_on_error=False)
        else:
            buf = b"".join([*(_wire.pack_evalsha(s.sha, k, a) for s, k, a in calls),
                            *(_wire.pack_command(*r) for r in reads)])
            replies = self.wire.run([(buf, len(calls) + len(reads))])
        missing = [i for i in range(len(calls)) if isinstance(replies[i], rex.NoScriptError)]
        if missing and depth < 3:
            # Those calls did not run: load their scripts once, send only them (and the reads,
            # so they see the effects of every call) again.
            for script in {calls[i][0].sha: calls[i][0] for i in missing}.values():
                self.client.execute_command("SCRIPT", "LOAD", script.source)
            again = self._flush_once([calls[i] for i in missing], reads, depth + 1)
            for i, reply in zip(missing, again[: len(missing)], strict=True):
                replies[i] = reply
            replies[len(calls):] = again[len(missing):]
        for reply in replies:
            if isinstance(reply, Exception) and is_transient(reply):
                raise reply
        return replies

    def flush(self, calls: Sequence[Call], reads: Sequence[Sequence[Any]] = ()) -> list[Any]:
        """Script calls, then plain read commands, in one flush: one round trip.

        Replies in order (calls, then reads); a script's error reply is returned in its
        place. On a transient failure the whole flush is sent again (scripts are
        idempotent or fenced: a resent finish reports STALE, a resent claim skips what it
        already leased; such leases expire and are reaped, the at-least-once contract).
        The consumer's drain loop uses it to complete, claim and peek in one round trip
        (docs/decisions/0008-drain-path.md).
        """
        for script, keys, args in calls:
            script.check(len(keys), len(args))
        if not calls and not reads:
            return []
        return list(self._retrying(self._flush_once, calls, reads))

    def server_time_ms(self) -> int:
        """The server's clock in milliseconds (for tests and diagnostics, never for leases)."""
        sec, usec = self.command("TIME")
        return int(sec) * 1000 + int(usec) // 1000

    def _wait_once(self, calls: Sequence[Call], replicas: int,
                         timeout_ms: int) -> tuple[list[Any], int]:
        # WAIT counts the replicas that acknowledged *this connection's* writes, so it
        # goes in the same pipeline (one connection) as the calls it vouches for.
        replies: list[Any] = [None] * len(calls)
        todo = list(range(len(calls)))
        acked: int | None = None
        for _ in range(3):  # NOSCRIPT: load, send only those calls again (and WAIT again)
            pipe = self.client.pipeline(transaction=False)
            for i in todo:
                script, keys, args = calls[i]
                pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
            pipe.execute_command("WAIT", replicas, timeout_ms)
            *got, count = pipe.execute(raise_on_error=False)
            if isinstance(count, Exception):
                raise count
            acked = int(count) if acked is None else min(acked, int(count))
            for i, reply in zip(todo, got, strict=True):
                replies[i] = reply
            todo = [i for i in todo if isinstance(replies[i], rex.NoScriptError)]
            if not todo:
                break
            for script in {calls[i][0].sha: calls[i][0] for i in todo}.values():
                self.client.execute_command("SCRIPT", "LOAD", script.source)
        for reply in replies:
            if isinstance(reply, Exception) and is_transient(reply):
                raise reply
        return replies, acked or 0

    def pipeline_wait(self, calls: Sequence[Call], *, replicas: int,
                            timeout_ms: int) -> tuple[list[Any], list[int]]:
        """Run calls, then ``WAIT replicas timeout_ms`` on the connection that sent them.

        Returns the replies in input order and, per call, how many replicas acknowledged
        its writes within ``timeout_ms`` (durable admission, docs/cluster.md).
        """
        for script, keys, args in calls:
            script.check(len(keys), len(args))
        if not calls:
            return [], []
        replies, acked = self._retrying(self._wait_once, calls, replicas, timeout_ms)
        return replies, [acked] * len(calls)

    def wake_subscription(self, channel: str) -> Any:
        """``SSUBSCRIBE channel`` (a queue's wake channel); ``get_message``/``close``."""
        pubsub = self.client.pubsub()
        pubsub.ssubscribe(channel)
        return pubsub
