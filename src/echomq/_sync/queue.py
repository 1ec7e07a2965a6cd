# Generated from echomq/_async/queue.py by scripts/unasync_gen.py. Do not edit.
"""A queue: admission, the claim plane and inspection, each one Lua script per transition.

Scripts that act on jobs they cannot name in advance (claim, promote, reap, browse,
requeue, purge) follow one pattern so that every key they touch is declared: the
client *peeks* candidate ids with a read (``ZRANGE``), then calls the script with the
candidates' job keys in KEYS; the script re-checks each candidate on the server and
skips those that moved meanwhile. See docs/decisions/0002-peek-then-act.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from redis.exceptions import ResponseError

from echomq import ids as branded
from echomq import keyspace
from echomq._sync.cluster import ClusterConnector
from echomq._sync.connector import Call, Connector
from echomq._sync.memory import typed_refusals
from echomq._sync.upkeep import STATES, Upkeep, _text
from echomq.errors import (
    EchoMQError,
    InvalidJobId,
    NotDurable,
    PayloadTooLarge,
    ProtocolVersionError,
)
from echomq.model import (
    PROTOCOL,
    Completion,
    Lease,
    QueueOptions,
    RetryOutcome,
    Verdict,
    decode_verdict,
)
from echomq.replies import reply_code
from echomq.scripts import Script, load

__all__ = ["Queue"]

_FINISH_BATCH = 256


def _verdicts(replies: Sequence[Any]) -> list[Completion]:
    """Flatten complete_batch replies into one verdict per attempt (errors raised)."""
    out = []
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
        out += [Completion.COMPLETED if r == 1 else Completion.STALE for r in reply]
    return out


class Queue(Upkeep):
    """One queue named ``name`` on a connector. Cheap to create; holds no connection."""

    def __init__(
        self, connector: Connector | ClusterConnector, name: str, *,
        options: QueueOptions | None = None,
    ) -> None:
        keyspace.check_queue(name)
        self.connector = connector
        self.name = name
        self.options = options or QueueOptions()
        k = {t: keyspace.queue_key(name, t) for t in (*STATES, "lanes", "meta", "inflight",
                                                       "wake", "maint")}
        self.keys = k
        self._job_prefix = keyspace.queue_key(name, "job:")

    # ----------------------------------------------------------------- helpers
    def job_key(self, job_id: str) -> str:
        """``emq:{q}:job:<id>``; refuses a malformed id before any I/O."""
        if not branded.valid(job_id):
            raise InvalidJobId(f"not a branded id: {job_id!r}")
        return self._job_prefix + job_id

    def _payload(self, payload: object) -> bytes:
        if not isinstance(payload, bytes | bytearray | memoryview):
            raise TypeError(f"payload must be bytes, not {type(payload).__name__}")
        data = bytes(payload)
        if len(data) > self.options.max_payload:
            raise PayloadTooLarge(
                f"payload of {len(data)} bytes exceeds max_payload={self.options.max_payload}"
            )
        return data

    def fence(self) -> str:
        """Check (once per connector) that the queue speaks our protocol major version."""
        if self.options.fence and self.name not in self.connector.fenced:
            try:
                recorded = self.connector.eval(load("fence"), [self.keys["meta"]], [PROTOCOL])
            except ResponseError as exc:
                if str(exc).startswith("EMQVERSION"):
                    raise ProtocolVersionError(str(exc)) from None
                raise
            self.connector.fenced.add(self.name)
            return _text(recorded)
        return PROTOCOL

    def _enqueue_call(self, job_id: str, payload: bytes) -> Call:
        k = self.keys
        return (load("enqueue"), [self.job_key(job_id), k["pending"], k["wake"]], [job_id, payload])

    # --------------------------------------------------------------- admission
    def enqueue(self, job_id: str, payload: bytes) -> Verdict:
        """Admit one job (seed @enqueue): ENQUEUED, DUPLICATE or KIND.

        A malformed id raises InvalidJobId and an oversized payload PayloadTooLarge,
        both before any I/O.
        """
        script, keys, args = self._enqueue_call(job_id, self._payload(payload))
        self.fence()
        return self._admission(script, keys, args)

    def _admission(self, script: Script, keys: Sequence[Any], args: Sequence[Any]) -> Verdict:
        if self.options.durable_replicas:
            reply = (self._admit_pipeline([(script, keys, args)]))[0]
        else:
            try:
                reply = self.connector.eval(script, keys, args)
            except ResponseError as exc:
                (reply,) = typed_refusals(self.connector, self.name, [exc])
        verdict = decode_verdict(reply)
        if isinstance(verdict, EchoMQError):
            raise verdict
        return verdict

    def enqueue_many(
        self, pairs: Iterable[tuple[str, bytes]]
    ) -> list[Verdict | EchoMQError]:
        """Admit many jobs: ``SCRIPT LOAD`` once, then one pipelined ``EVALSHA`` per item.

        Returns one verdict per item, in input order. An item that cannot be sent (a
        malformed id, an oversized payload) gets its error in its place and nothing is
        written for it; the other items are unaffected. An id repeated inside the batch
        is enqueued once and reported DUPLICATE after. Each item is atomic on its own;
        the batch is not a transaction. Items go out in flushes of ``options.batch``.
        """
        out: list[Verdict | EchoMQError] = []
        calls: list[Call] = []
        where: list[int] = []
        for i, (job_id, payload) in enumerate(pairs):
            try:
                calls.append(self._enqueue_call(job_id, self._payload(payload)))
            except (EchoMQError, TypeError) as exc:
                out.append(exc if isinstance(exc, EchoMQError) else InvalidJobId(str(exc)))
                continue
            out.append(Verdict.DUPLICATE)  # placeholder, replaced below
            where.append(i)
        if not calls:
            return out
        self.fence()
        self._preload(load("enqueue"))
        replies = self._admit_pipeline(calls, flush=self.options.batch)
        for i, reply in zip(where, replies, strict=True):
            out[i] = decode_verdict(reply)
        return out

    def _preload(self, script: Script) -> None:
        """``SCRIPT LOAD`` before a batch, so its calls need no NOSCRIPT round. A server that
        refuses it for back-pressure refuses the batch too: each item gets its typed error."""
        try:
            self.connector.load(script)
        except ResponseError as exc:
            if reply_code(exc) not in ("BUSY", "OOM"):
                raise

    def _admit_pipeline(self, calls: Sequence[Call], flush: int | None = None) -> list[Any]:
        """Pipelined admission calls. With ``durable_replicas`` each flush ends with a WAIT
        on its connection, and a job written but acknowledged by too few replicas gets
        :class:`NotDurable` in its place. DUPLICATE carries no durability claim: WAIT
        vouches only for the writes of the call it follows."""
        o = self.options
        if not o.durable_replicas:
            replies = self.connector.pipeline(calls, flush=flush)
            return typed_refusals(self.connector, self.name, replies)
        out: list[Any] = []
        step = flush or len(calls)
        for start in range(0, len(calls), step):
            replies, acked = self.connector.pipeline_wait(
                calls[start : start + step], replicas=o.durable_replicas,
                timeout_ms=o.durable_timeout_ms)
            for reply, n in zip(replies, acked, strict=True):
                if reply == 1 and n < o.durable_replicas:
                    reply = NotDurable(
                        f"queue {self.name!r}: {n} of {o.durable_replicas} replicas acknowledged "
                        f"the admission within {o.durable_timeout_ms} ms; it is written on the "
                        "primary only and may be lost on failover")
                out.append(reply)
        return typed_refusals(self.connector, self.name, out)

    def _admit_call(
        self, job_id: str, payload: bytes, lane: str | None, delay_ms: int, serial: bool,
        max_attempts: int | None,
    ) -> Call:
        data = self._payload(payload)
        if lane is not None and (not isinstance(lane, str) or not lane):
            raise ValueError("lane must be a non-empty str or None")
        if not isinstance(delay_ms, int) or delay_ms < 0:
            raise ValueError("delay_ms must be an int >= 0")
        if max_attempts is not None and max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        k = self.keys
        keys = [self.job_key(job_id), k["pending"], k["delayed"], k["lanes"], k["meta"], k["wake"]]
        args: list[str | bytes | int] = [job_id, data, lane or "", delay_ms, "1" if serial else "0",
                                         "" if max_attempts is None else max_attempts]
        return (load("admit"), keys, args)

    def admit(
        self,
        job_id: str,
        payload: bytes,
        *,
        lane: str | None = None,
        delay_ms: int = 0,
        serial: bool = False,
        max_attempts: int | None = None,
    ) -> Verdict:
        """Admit one job onto a lane and/or after a delay (server clock).

        ``serial=True`` holds the lane to one job in flight, so its jobs run in order.
        Bad arguments raise (ValueError, InvalidJobId, PayloadTooLarge) before any I/O.
        """
        script, keys, args = self._admit_call(job_id, payload, lane, delay_ms, serial, max_attempts)
        self.fence()
        return self._admission(script, keys, args)

    def admit_many(
        self, items: Iterable[tuple[str, bytes, str | None]], *, serial: bool = False
    ) -> list[Verdict | EchoMQError]:
        """Admit ``(id, payload, lane)`` items in pipelined flushes; verdicts in input order."""
        out: list[Verdict | EchoMQError] = []
        calls: list[Call] = []
        where: list[int] = []
        for i, (job_id, payload, lane) in enumerate(items):
            try:
                calls.append(self._admit_call(job_id, payload, lane, 0, serial, None))
            except (EchoMQError, TypeError, ValueError) as exc:
                out.append(exc if isinstance(exc, EchoMQError) else InvalidJobId(str(exc)))
                continue
            out.append(Verdict.DUPLICATE)
            where.append(i)
        if calls:
            self.fence()
            self._preload(load("admit"))
            replies = self._admit_pipeline(calls, flush=self.options.batch)
            for i, reply in zip(where, replies, strict=True):
                out[i] = decode_verdict(reply)
        return out

    # ------------------------------------------------------------- claim plane
    def claim(self, count: int = 1, *, lease_ms: int, window: int | None = None) -> list[Lease]:
        """Lease up to ``count`` pending jobs for ``lease_ms`` (server clock).

        Peeks ``window`` candidates (default ``2*count + 64``, room to skip jobs of
        busy serial lanes) and claims with one script.
        """
        if count < 1 or lease_ms < 1:
            raise ValueError("count and lease_ms must be >= 1")
        peek = window or 2 * count + 64
        ids = self.connector.command("ZRANGE", self.keys["pending"], 0, peek - 1)
        if not ids:
            return []
        return self._claim(ids, count, lease_ms)

    def _claim_call(self, ids: Sequence[bytes], count: int, lease_ms: int) -> Call:
        k = self.keys
        keys = [k["pending"], k["active"], k["lanes"], k["meta"], k["inflight"]]
        keys += [self._job_prefix + _text(i) for i in ids]
        return (load("claim"), keys, [lease_ms, count, *ids])

    def _claim(self, ids: Sequence[bytes], count: int, lease_ms: int) -> list[Lease]:
        flat = self.connector.eval(*self._claim_call(ids, count, lease_ms))
        return self._leases(flat)

    def _leases(self, flat: Sequence[Any]) -> list[Lease]:
        return [
            Lease(
                queue=self.name,
                id=_text(flat[i]),
                attempt=int(flat[i + 1]),
                payload=flat[i + 2] or b"",
                lane=_text(flat[i + 3]) or None,
                deadline_ms=int(flat[i + 4]),
            )
            for i in range(0, len(flat), 5)
        ]

    def heartbeat(self, lease: Lease, *, lease_ms: int) -> int | None:
        """Extend ``lease``; returns the new deadline (server ms) or None if the lease is lost."""
        reply = self.connector.eval(
            load("heartbeat"),
            [self.keys["active"], self.job_key(lease.id)],
            [lease.id, lease.attempt, lease_ms],
        )
        return int(reply) or None

    def heartbeat_many(self, leases: Sequence[Lease], *, lease_ms: int) -> list[int | None]:
        """Extend many leases in one flush; one deadline or None per lease, in order."""
        calls: list[Call] = [
            (load("heartbeat"), [self.keys["active"], self.job_key(x.id)], [x.id, x.attempt, lease_ms])
            for x in leases
        ]
        replies = self.connector.pipeline(calls)
        out: list[int | None] = []
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
            out.append(int(reply) or None)
        return out

    def _complete_call(self, lease: Lease, result: bytes) -> Call:
        k = self.keys
        return (
            load("complete"),
            [k["active"], self.job_key(lease.id), k["done"], k["inflight"]],
            [lease.id, lease.attempt, self.options.keep_done_ms, result],
        )

    def _complete_batch_call(self, finished: Sequence[tuple[Lease, bytes]]) -> Call:
        k = self.keys
        keys = [k["active"], k["done"], k["inflight"]]
        args: list[str | bytes | int] = [self.options.keep_done_ms]
        for lease, result in finished:
            keys.append(self.job_key(lease.id))
            args += (lease.id, lease.attempt, result)
        return (load("complete_batch"), keys, args)

    def _complete_batches(self, finished: Sequence[tuple[Lease, bytes]]) -> list[Call]:
        # One complete_batch call per _FINISH_BATCH attempts: each call stays short (the
        # server runs nothing else meanwhile) and within Lua's unpack limit.
        return [self._complete_batch_call(finished[i : i + _FINISH_BATCH])
                for i in range(0, len(finished), _FINISH_BATCH)]

    def complete(self, lease: Lease, result: bytes = b"") -> Completion:
        """Finish an attempt (fenced). STALE if the attempt no longer holds the job."""
        script, keys, args = self._complete_call(lease, result)
        reply = self.connector.eval(script, keys, args)
        return Completion.COMPLETED if reply == 1 else Completion.STALE

    def complete_many(
        self, leases: Sequence[Lease], results: Sequence[bytes] | None = None
    ) -> list[Completion]:
        """Finish many attempts in one flush, each fenced on its own, with optional results.

        Sent as ``complete_batch`` calls of up to 256 attempts (one script call per batch
        instead of per attempt: about half the server's CPU); one verdict per lease, in order.
        """
        res = results if results is not None else [b""] * len(leases)
        if not leases:
            return []
        replies = self.connector.pipeline(
            self._complete_batches(list(zip(leases, res, strict=True))))
        return _verdicts(replies)

    def settle(
        self, finished: Sequence[tuple[Lease, bytes]], *, count: int, lease_ms: int,
        candidates: Sequence[bytes], window: int,
    ) -> tuple[list[Completion], list[Lease], list[bytes]]:
        """Complete ``finished`` attempts, claim up to ``count`` of ``candidates`` and peek
        the next ``window`` candidates, all in one flush (one round trip).

        Each completion is its own fenced ``complete`` call with its own verdict; the claim
        is the ``claim`` script on ids peeked by an earlier flush, so it re-checks every
        candidate on the server (docs/decisions/0002) and skips those that moved; the peek
        runs after the claim, so its ids are the next candidates. ``count`` 0 or no
        candidates: no claim; ``window`` 0: no peek. Returns (verdicts in input order,
        leases, next candidates).
        """
        if count < 0 or lease_ms < 1 or window < 0:
            raise ValueError("count and window must be >= 0 and lease_ms >= 1")
        calls = self._complete_batches(finished)
        nb = len(calls)
        claim = bool(count and candidates)
        if claim:
            calls.append(self._claim_call(candidates, count, lease_ms))
        reads = [("ZRANGE", self.keys["pending"], 0, window - 1)] if window else []
        replies = self.connector.flush(calls, reads)
        done = _verdicts(replies[:nb])
        if claim and isinstance(replies[nb], Exception):
            raise replies[nb]
        leases = self._leases(replies[nb]) if claim else []
        return done, leases, list(replies[len(calls)]) if window else []

    def _retry(self, lease: Lease, delay_ms: int, error: str, mode: str) -> RetryOutcome:
        if delay_ms < 0:
            raise ValueError("delay_ms must be >= 0")
        k = self.keys
        keys = [k["active"], self.job_key(lease.id), k["delayed"], k["dead"], k["inflight"],
                k["pending"], k["lanes"], k["meta"], k["wake"]]
        args = [lease.id, lease.attempt, int(delay_ms), self.options.max_attempts, error, mode]
        reply = self.connector.eval(load("retry"), keys, args)
        return {1: RetryOutcome.SCHEDULED, 2: RetryOutcome.DEAD}.get(reply, RetryOutcome.STALE)

    def retry(self, lease: Lease, *, delay_ms: int, error: str = "") -> RetryOutcome:
        """Record a failed attempt; run again after ``delay_ms``, or dead at the limit."""
        return self._retry(lease, delay_ms, error, "fail")

    def defer(self, lease: Lease, *, delay_ms: int) -> RetryOutcome:
        """Put the job back for ``delay_ms`` without counting a failure (rate budgets)."""
        return self._retry(lease, delay_ms, "", "defer")

    def job(self, job_id: str) -> dict[str, bytes] | None:
        """The row of one job, or None."""
        row = self.connector.command("HGETALL", self.job_key(job_id))
        return {_text(f): v for f, v in row.items()} if row else None
