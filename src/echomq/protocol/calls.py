"""Script calls of the EchoMQ protocol, pure (no I/O): named parameters in, a :class:`Call` out.

For every Lua script there is one *builder*; its KEYS and ARGV come out in the order
the script's contract header declares, and :func:`layout` checks at import that the
names a builder uses are the header's, in order. Connectors only send calls; queues
only build them (here) and decode replies (:mod:`echomq.protocol.decoders`).
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from echomq.core.bounds import MAX_BEATS, MAX_PROGRESS
from echomq.core.errors import InvalidArgument, ScriptContractError
from echomq.core.model import Lease
from echomq.protocol.decoders import text
from echomq.protocol.keyspace import QueueKeys
from echomq.protocol.scripts import Script, load

__all__ = [
    "Call",
    "admit",
    "browse",
    "call_token",
    "cancel",
    "claim",
    "complete",
    "complete_batch",
    "deduped",
    "enqueue",
    "enqueue_batch",
    "expire",
    "fence",
    "heartbeat",
    "heartbeat_batch",
    "layout",
    "limits",
    "pause",
    "peek",
    "pending_size",
    "progress",
    "promote",
    "purge",
    "reap",
    "requeue",
    "retry",
    "row",
    "stats",
    "trace_attach",
]


@dataclass(frozen=True, slots=True)
class Call:
    """One script call, named: the script, its KEYS and its ARGV in the order the script's
    contract header declares (each builder below is checked against the header at import).

    Not a tuple: a call is passed whole (``connector.eval(call.script, call.keys,
    call.args)`` at the one place a connector sends it), never unpacked by position."""

    script: Script
    keys: Sequence[str | bytes]
    args: Sequence[str | bytes | int]
    wire: bytes | None = field(default=None, compare=False, repr=False)
    """The call already encoded as one RESP ``EVALSHA`` request of ``keys`` and ``args``,
    when its builder made it (:class:`Enqueuer`): the bulk wire sends these bytes as they
    are instead of encoding the call again. None: the wire encodes it."""
    encode: Callable[[], bytes] | None = field(default=None, compare=False, repr=False)
    """Makes that request when the bulk wire is about to send it (:class:`BatchEnqueuer`):
    a batch's later calls are encoded while the server runs its earlier flushes, not all
    before the first one goes out. Used when ``wire`` is None."""

    def request(self) -> bytes | None:
        """The call's RESP request when its builder made it (or makes it now), else None."""
        if self.wire is not None:
            return self.wire
        return None if self.encode is None else self.encode()

    def named(self) -> dict[str, Any]:
        """KEYS and ARGV by their header names (a variadic tail as a list)."""
        out: dict[str, Any] = {}
        for names, values, tail in ((self.script.keys, self.keys, self.script.variadic_keys),
                                    (self.script.argv, self.args, self.script.variadic_argv)):
            fixed = len(names) - tail
            out.update(zip(names[:fixed], values[:fixed], strict=False))
            if tail:
                out[names[-1]] = list(values[fixed:])
        return out


def layout(name: str, keys: Sequence[str], argv: Sequence[str]) -> Script:
    """The script ``name``, after checking that a builder's names are its header's, in order."""
    script = load(name)
    if tuple(keys) != script.keys or tuple(argv) != script.argv:
        raise ScriptContractError(
            f"{name}: builder names keys {tuple(keys)} argv {tuple(argv)}, header declares "
            f"keys {script.keys} argv {script.argv}")
    return script


# Call tokens (docs/protocol.md, "Call tokens"): 64 random bits per admission or finish,
# from a generator of our own (never the process-wide ``random``), seeded afresh from the
# OS in a forked child so that parent and child never draw the same tokens.
_tokens = random.Random()
os.register_at_fork(after_in_child=_tokens.seed)
TOKEN_BYTES = 32
"""The longest call token a script accepts (EMQARG past it); ours are 16 characters."""


def call_token() -> str:
    """A fresh call token: an admission or finish carries one in ARGV, and a resend of the
    same call (the connector's, after a lost reply) carries the same, so the script answers
    what the first send earned (ENQUEUED, not DUPLICATE; COMPLETED, not STALE)."""
    return _tokens.getrandbits(64).to_bytes(8, "big").hex()  # the cheapest of the ways tried


_ENQUEUE = layout("enqueue", ("job", "pending", "wake", "meta", "parked", "active", "rate"),
                  ("id", "payload", "token"))


def enqueue(k: QueueKeys, job_id: str, payload: bytes, *, token: str | None = None) -> Call:
    """``token``: the call's token (a fresh :func:`call_token` when None), as in every
    admission and finish builder below."""
    return Call(_ENQUEUE, [k.job(job_id), k.pending, k.wake, k.meta, k.parked, k.active, k.rate],
                [job_id, payload, token or call_token()])


_ENQUEUE_BATCH = layout("enqueue_batch", ("pending", "wake", "meta", "parked", "active", "rate",
                                         "jobs"), ("token", "payloads"))


def enqueue_batch(k: QueueKeys, ids: Sequence[str], payloads: Sequence[bytes], *,
                  token: str | None = None) -> Call:
    """The ``enqueue_batch`` call of ``ids`` and their ``payloads`` (one each, in order);
    each id travels as its job key's tail."""
    if len(ids) != len(payloads) or not ids:
        raise InvalidArgument(f"{len(ids)} ids and {len(payloads)} payloads: one payload per id, "
                              "at least one")
    return Call(_ENQUEUE_BATCH, [k.pending, k.wake, k.meta, k.parked, k.active, k.rate,
                                 *map(k.job, ids)], [token or call_token(), *payloads])


_ADMIT = layout("admit", ("job", "pending", "delayed", "lanes", "meta", "wake", "expiring"),
                 ("id", "payload", "lane", "delay_ms", "serial", "max_attempts", "priority",
                  "timeout_ms", "token", "expires_ms"))


def admit(k: QueueKeys, job_id: str, payload: bytes, *, lane: str, delay_ms: int, serial: bool,
          max_attempts: int | None, priority: int = 0, timeout_ms: int | None = None,
          token: str | None = None, expires_ms: int | None = None) -> Call:
    """``expires_ms``: the job must start within that many ms of its admission (server
    clock), else it ends ``expired`` (decision 0045); None for no deadline."""
    return Call(_ADMIT, [k.job(job_id), k.pending, k.delayed, k.lanes, k.meta, k.wake, k.expiring],
                [job_id, payload, lane, delay_ms, "1" if serial else "0",
                 "" if max_attempts is None else max_attempts, priority,
                 "" if timeout_ms is None else timeout_ms, token or call_token(),
                 "" if expires_ms is None else expires_ms])


_THROTTLE = layout("throttle", ("job", "pending", "delayed", "lanes", "meta", "wake", "dedupe",
                                "expiring"),
                   ("id", "payload", "lane", "delay_ms", "serial", "max_attempts", "priority",
                    "timeout_ms", "token", "window_ms", "expires_ms"))
_DEBOUNCE = layout("debounce", ("job", "pending", "delayed", "lanes", "meta", "wake", "dedupe",
                                "inflight", "holder", "expiring"),
                   ("id", "payload", "lane", "delay_ms", "serial", "max_attempts", "priority",
                    "timeout_ms", "token", "window_ms", "holder", "expires_ms"))


def deduped(k: QueueKeys, job_id: str, payload: bytes, *, key: str, window_ms: int, mode: str,
            lane: str, delay_ms: int, serial: bool, max_attempts: int | None, priority: int = 0,
            timeout_ms: int | None = None, holder: str = "", token: str | None = None,
            expires_ms: int | None = None) -> Call:
    """The ``throttle`` or ``debounce`` call (``mode``) of one admission with a dedupe
    window of ``window_ms`` on ``key`` (:mod:`echomq.protocol.dedupe`); ``holder`` is the
    id a debounce expects to hold the key ('' for none); ``expires_ms`` a new job's
    deadline to start by (decision 0045; a replaced holder keeps its own)."""
    args: list[Any] = [job_id, payload, lane, delay_ms, "1" if serial else "0",
                       "" if max_attempts is None else max_attempts, priority,
                       "" if timeout_ms is None else timeout_ms, token or call_token(), window_ms]
    keys = [k.job(job_id), k.pending, k.delayed, k.lanes, k.meta, k.wake, k.dedupe(key)]
    expires = "" if expires_ms is None else expires_ms
    if mode == "throttle":
        return Call(_THROTTLE, [*keys, k.expiring], [*args, expires])
    return Call(_DEBOUNCE, [*keys, k.inflight, k.job(holder or job_id), k.expiring],
                [*args, holder, expires])


_FENCE = layout("fence", ("meta",), ("version",))


def fence(k: QueueKeys, version: str) -> Call:
    return Call(_FENCE, [k.meta], [version])


_CLAIM = layout("claim", ("pending", "active", "lanes", "meta", "inflight", "rate", "lane_rate",
                          "lane_seen", "expired", "expiring", "finished", "jobs"),
                ("lease_ms", "count", "ids"))


def claim(k: QueueKeys, ids: Sequence[bytes | str], *, count: int, lease_ms: int) -> Call:
    keys = [k.pending, k.active, k.lanes, k.meta, k.inflight, k.rate, k.lane_rate, k.lane_seen,
            k.expired, k.expiring, k.finished]
    keys += [k.job_prefix + text(i) for i in ids]
    return Call(_CLAIM, keys, [lease_ms, count, *ids])


_PAUSE = layout("pause", ("meta", "pending", "wake"), ("paused",))


def pause(k: QueueKeys, paused: bool | None) -> Call:
    """Pause (True), resume (False) or only read (None) the queue's claim gate."""
    return Call(_PAUSE, [k.meta, k.pending, k.wake], ["" if paused is None else "1" if paused else "0"])


_LIMITS = layout("limits", ("meta", "rate"), ("rate_max", "rate_ms", "lane_max", "lane_ms"))


def limits(k: QueueKeys, rate: tuple[int, int] | None, lane_rate: tuple[int, int] | None) -> Call:
    """Set (max, window_ms) for the queue and per lane; None removes a limit."""
    q, ln = rate or (0, 0), lane_rate or (0, 0)
    return Call(_LIMITS, [k.meta, k.rate], [q[0], q[1], ln[0], ln[1]])


_HEARTBEAT = layout("heartbeat", ("active", "job", "meta"), ("id", "attempt", "lease_ms"))


def heartbeat(k: QueueKeys, lease: Lease, *, lease_ms: int) -> Call:
    return Call(_HEARTBEAT, [k.active, k.job(lease.id), k.meta], [lease.id, lease.attempt, lease_ms])


_HEARTBEAT_BATCH = layout("heartbeat_batch", ("active", "meta", "jobs"), ("lease_ms", "leases"))


def heartbeat_batch(k: QueueKeys, leases: Sequence[Lease], *, lease_ms: int) -> Call:
    """One ``heartbeat_batch`` call extending 1..MAX_BEATS ``leases`` of the queue of ``k``
    (each lease's job key in KEYS, its id and attempt in ARGV, in order)."""
    if not 1 <= len(leases) <= MAX_BEATS:
        raise InvalidArgument(f"a heartbeat_batch call extends 1..{MAX_BEATS} leases, not {len(leases)}")
    keys: list[str | bytes] = [k.active, k.meta]
    args: list[str | bytes | int] = [lease_ms]
    for lease in leases:
        keys.append(k.job(lease.id))  # refuses a malformed id before any I/O
        args += (lease.id, lease.attempt)
    return Call(_HEARTBEAT_BATCH, keys, args)


_PROGRESS = layout("progress", ("active", "job", "meta"), ("id", "attempt", "progress"))


def progress(k: QueueKeys, lease: Lease, report: bytes) -> Call:
    if len(report) > MAX_PROGRESS:
        raise InvalidArgument(f"a progress report is at most {MAX_PROGRESS} bytes, not {len(report)}")
    return Call(_PROGRESS, [k.active, k.job(lease.id), k.meta], [lease.id, lease.attempt, report])


_COMPLETE = layout("complete", ("active", "job", "done", "inflight", "meta", "finished"),
                    ("id", "attempt", "keep_ms", "result", "token"))


def complete(k: QueueKeys, lease: Lease, *, keep_ms: int, result: bytes,
             token: str | None = None) -> Call:
    return Call(_COMPLETE, [k.active, k.job(lease.id), k.done, k.inflight, k.meta, k.finished],
                [lease.id, lease.attempt, keep_ms, result, token or call_token()])


_COMPLETE_BATCH = layout("complete_batch", ("active", "done", "inflight", "meta", "finished", "jobs"),
                          ("keep_ms", "token", "attempts"))


def complete_batch(k: QueueKeys, finished: Sequence[tuple[Lease, bytes]], *, keep_ms: int,
                   token: str | None = None) -> Call:
    keys = [k.active, k.done, k.inflight, k.meta, k.finished]
    args: list[str | bytes | int] = [keep_ms, token or call_token()]
    for lease, result in finished:
        keys.append(k.job(lease.id))
        args += (lease.id, lease.attempt, result)
    return Call(_COMPLETE_BATCH, keys, args)


_RETRY = layout("retry", ("active", "job", "delayed", "dead", "inflight", "pending", "lanes",
                           "meta", "wake", "done", "finished", "expiring"),
                 ("id", "attempt", "delay_ms", "max_attempts", "error", "mode", "token"))


def retry(k: QueueKeys, lease: Lease, *, delay_ms: int, max_attempts: int, error: str,
          mode: str, token: str | None = None) -> Call:
    return Call(_RETRY, [k.active, k.job(lease.id), k.delayed, k.dead, k.inflight, k.pending,
                         k.lanes, k.meta, k.wake, k.done, k.finished, k.expiring],
                [lease.id, lease.attempt, delay_ms, max_attempts, error, mode, token or call_token()])


_PROMOTE = layout("promote", ("delayed", "pending", "lanes", "meta", "wake", "inflight", "jobs"),
                   ("ids",))


def promote(k: QueueKeys, ids: Sequence[bytes | str]) -> Call:
    keys = [k.delayed, k.pending, k.lanes, k.meta, k.wake, k.inflight]
    return Call(_PROMOTE, keys + [k.job_prefix + text(i) for i in ids], list(ids))


_REAP = layout("reap", ("active", "pending", "dead", "lanes", "meta", "inflight", "wake", "done",
                        "finished", "expiring", "jobs"), ("max_attempts", "ids"))


def reap(k: QueueKeys, ids: Sequence[bytes | str], *, max_attempts: int) -> Call:
    keys = [k.active, k.pending, k.dead, k.lanes, k.meta, k.inflight, k.wake, k.done, k.finished,
            k.expiring]
    return Call(_REAP, keys + [k.job_prefix + text(i) for i in ids], [max_attempts, *ids])


_PURGE = layout("purge", ("set", "meta", "jobs"), ("state", "min_age_ms", "ids"))


def purge(k: QueueKeys, state: str, ids: Sequence[bytes | str], *, min_age_ms: int) -> Call:
    keys = [k.state(state), k.meta, *(k.job_prefix + text(i) for i in ids)]
    return Call(_PURGE, keys, [state, min_age_ms, *ids])


_REQUEUE = layout("requeue", ("dead", "pending", "lanes", "meta", "wake", "expiring", "jobs"),
                  ("ids",))


def requeue(k: QueueKeys, ids: Sequence[bytes | str]) -> Call:
    keys = [k.dead, k.pending, k.lanes, k.meta, k.wake, k.expiring]
    return Call(_REQUEUE, keys + [k.job_prefix + text(i) for i in ids], list(ids))


_EXPIRE = layout("expire", ("expiring", "pending", "delayed", "expired", "inflight", "meta",
                            "finished", "jobs"), ("ids",))


def expire(k: QueueKeys, ids: Sequence[bytes | str]) -> Call:
    """The expiry reaper's call over candidate ids peeked from the expiring index."""
    keys = [k.expiring, k.pending, k.delayed, k.expired, k.inflight, k.meta, k.finished]
    return Call(_EXPIRE, keys + [k.job_prefix + text(i) for i in ids], list(ids))


_CANCEL = layout("cancel", ("pending", "delayed", "done", "inflight", "meta", "finished", "jobs"),
                 ("ids",))


def cancel(k: QueueKeys, ids: Sequence[bytes | str]) -> Call:
    keys = [k.pending, k.delayed, k.done, k.inflight, k.meta, k.finished]
    return Call(_CANCEL, keys + [k.job_prefix + text(i) for i in ids], list(ids))


_TRACE_ATTACH = layout("trace_attach", ("job", "meta"), ("traceparent",))


def trace_attach(k: QueueKeys, job_id: str, traceparent: str) -> Call:
    return Call(_TRACE_ATTACH, [k.job(job_id), k.meta], [traceparent])


_BROWSE = layout("browse", ("set", "meta", "jobs"), ("ids",))


def browse(k: QueueKeys, state: str, ids: Sequence[bytes | str]) -> Call:
    keys = [k.state(state), k.meta, *(k.job_prefix + text(i) for i in ids)]
    return Call(_BROWSE, keys, list(ids))


_STATS = layout("stats", ("pending", "active", "delayed", "done", "dead", "meta", "expired"), ())


def stats(k: QueueKeys) -> Call:
    return Call(_STATS, [k.pending, k.active, k.delayed, k.done, k.dead, k.meta, k.expired], [])


_PEEK = layout("peek", ("set", "meta"), ("start", "count"))


def peek(k: QueueKeys, state: str, *, start: int, count: int) -> Call:
    """``state``: one of the state sets, or ``"expiring"`` (the expiry reaper's index)."""
    key = k.expiring if state == "expiring" else k.state(state)
    return Call(_PEEK, [key, k.meta], [start, count])


_ROW = layout("row", ("job", "meta"), ("id",))


def row(k: QueueKeys, job_id: str) -> Call:
    return Call(_ROW, [k.job(job_id), k.meta], [job_id])


_PENDING_SIZE = layout("pending_size", ("pending", "meta"), ())


def pending_size(k: QueueKeys) -> Call:
    return Call(_PENDING_SIZE, [k.pending, k.meta], [])
