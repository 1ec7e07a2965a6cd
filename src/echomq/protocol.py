"""The EchoMQ protocol, pure (no I/O): bounds, script calls, reply decoders, error codes.

For every Lua script there is one *builder* (named parameters in, a :class:`Call` out,
its KEYS and ARGV in the order the script's contract header declares, checked once at
import) and one *decoder* (a raw reply in, a typed value out). Connectors only send
calls; queues only build and decode. ``docs/protocol.md`` is the prose of this module.

Bounds (checked before any I/O; outside them :class:`~echomq.errors.InvalidArgument`):

=================  ===========================  ======================================
argument           range                        why
=================  ===========================  ======================================
``lease_ms``       1 .. 86,400,000 (one day)    a longer lease hides a crashed worker's
                                                job for longer than anyone waits
``delay_ms``       0 .. 31,622,400,000 (366 d)  a later job belongs in a calendar
``beat_ms``        1 .. 3,600,000 (one hour)    and at most a third of ``lease_ms``
``max_attempts``   1 .. 10,000                  an int; ``None`` for the queue default
``keep_ms``        0 .. 31,622,400,000 (366 d)  retention of done/dead rows
``limit``          0 .. 10,000                  a page; 0 is an empty page, never "all"
``count``          0 .. 10,000                  jobs one claim may lease
``offset``         0 .. 2**53                   a position in a state's set
lane               1 .. 256 characters (str)    ``None`` for no lane
=================  ===========================  ======================================

Error replies carry a stable code as their first word; :data:`ERROR_CODES` maps each
code a script emits to its exception (tests/echomq/test_protocol.py checks that the
table and the Lua agree).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from echomq import ids as branded
from echomq import keyspace
from echomq.bounds import (
    MAX_ATTEMPTS,
    MAX_BEAT_MS,
    MAX_COUNT,
    MAX_DELAY_MS,
    MAX_KEEP_MS,
    MAX_LANE,
    MAX_LEASE_MS,
    MAX_OFFSET,
    MAX_PAGE,
    MAX_WINDOW,
    check_int,
)
from echomq.errors import (
    ConfigurationError,
    EchoMQError,
    InvalidArgument,
    InvalidJobId,
    InvalidPayload,
    PayloadTooLarge,
    ProtocolVersionError,
    ScriptContractError,
    ServerBusy,
    ServerError,
    ServerFull,
)
from echomq.model import (
    Completion,
    JobView,
    Lease,
    RetryOutcome,
    Stats,
    Verdict,
)
from echomq.scripts import Script, load

__all__ = [
    "ERROR_CODES",
    "MAX_ATTEMPTS",
    "MAX_BEAT_MS",
    "MAX_COUNT",
    "MAX_DELAY_MS",
    "MAX_KEEP_MS",
    "MAX_LANE",
    "MAX_LEASE_MS",
    "MAX_OFFSET",
    "MAX_PAGE",
    "MAX_WINDOW",
    "STATES",
    "Bulk",
    "Call",
    "QueueKeys",
    "check_int",
    "error_from_reply",
]

STATES = ("pending", "active", "delayed", "done", "dead")

# ------------------------------------------------------------------ errors
ERROR_CODES: dict[str, type[EchoMQError]] = {
    "EMQKIND": InvalidJobId,  # a non-JOB id (admission answers Verdict.KIND instead)
    "EMQARG": InvalidArgument,  # an argument outside its range, caught by the script
    "EMQKEYS": ScriptContractError,  # KEYS that do not line up with ARGV
    "EMQVERSION": ProtocolVersionError,  # the queue speaks another major version
    "OOM": ServerFull,  # the server's own refusals that mean "not now"
    "BUSY": ServerBusy,
    "NOPERM": ConfigurationError,  # refusals a person must fix (echomq.replies.FIXES)
    "WRONGPASS": ConfigurationError,
    "NOAUTH": ConfigurationError,
}
"""Every error code a reply can start with that EchoMQ gives a type of its own; any other
error reply is a :class:`ServerError`. Each mapped exception keeps the code in ``.code``."""


def error_from_reply(message: str) -> EchoMQError:
    """The typed exception for one error reply (``'EMQARG lease_ms ...'`` etc.)."""
    code = message.split(" ", 1)[0]
    exc = ERROR_CODES.get(code, ServerError)(message)
    exc.code = code  # type: ignore[attr-defined]
    return exc


def code_of(exc: BaseException) -> str | None:
    """The error code an exception was built from, or None (raised on the client)."""
    return getattr(exc, "code", None)


# ------------------------------------------------------------------ bounds
def check_lane(lane: object) -> str:
    """A lane name: 1..256 characters of str; '' on the wire means none."""
    if lane is None:
        return ""
    if not isinstance(lane, str) or not 1 <= len(lane) <= MAX_LANE:
        raise InvalidArgument(f"lane must be None or a str of 1..{MAX_LANE} characters, not {lane!r}")
    return lane


def check_payload(payload: object, limit: int) -> bytes:
    if not isinstance(payload, bytes | bytearray | memoryview):
        raise InvalidPayload(f"payload must be bytes, not {type(payload).__name__}")
    data = bytes(payload)
    if len(data) > limit:
        raise PayloadTooLarge(f"payload of {len(data)} bytes exceeds max_payload={limit}")
    return data


def check_lease(lease: object) -> Lease:
    if not isinstance(lease, Lease):
        raise InvalidArgument(f"expected a Lease, not {type(lease).__name__}")
    return lease


# ------------------------------------------------------------------ calls
class Call(NamedTuple):
    """One script call: the script, its KEYS, its ARGV (in the header's order)."""

    script: Script
    keys: Sequence[str | bytes]
    args: Sequence[str | bytes | int]

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


def _layout(name: str, keys: Sequence[str], argv: Sequence[str]) -> Script:
    """The script ``name``, after checking that a builder's names are its header's, in order."""
    script = load(name)
    if tuple(keys) != script.keys or tuple(argv) != script.argv:
        raise ScriptContractError(
            f"{name}: builder names keys {tuple(keys)} argv {tuple(argv)}, header declares "
            f"keys {script.keys} argv {script.argv}")
    return script


@dataclass(frozen=True, slots=True)
class QueueKeys:
    """Every key of one queue (all share the hash tag ``{name}``)."""

    name: str
    pending: str
    active: str
    delayed: str
    done: str
    dead: str
    lanes: str
    meta: str
    inflight: str
    wake: str
    maint: str
    job_prefix: str

    @classmethod
    def of(cls, name: str) -> QueueKeys:
        keyspace.check_queue(name)
        k = {t: keyspace.queue_key(name, t) for t in
             (*STATES, "lanes", "meta", "inflight", "wake", "maint")}
        return cls(name=name, job_prefix=keyspace.queue_key(name, "job:"), **k)

    def job(self, job_id: object) -> str:
        """``emq:{q}:job:<id>``; refuses a malformed id before any I/O."""
        if not isinstance(job_id, str) or not branded.valid(job_id):
            raise InvalidJobId(f"not a branded id: {job_id!r}")
        return self.job_prefix + job_id

    def state(self, state: object) -> str:
        if state not in STATES:
            raise InvalidArgument(f"state must be one of {STATES}, not {state!r}")
        return str(getattr(self, str(state)))

    def as_dict(self) -> dict[str, str]:
        return {t: getattr(self, t) for t in
                (*STATES, "lanes", "meta", "inflight", "wake", "maint")}


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


_ENQUEUE = _layout("enqueue", ("job", "pending", "wake", "meta"), ("id", "payload"))


def enqueue(k: QueueKeys, job_id: str, payload: bytes) -> Call:
    return Call(_ENQUEUE, [k.job(job_id), k.pending, k.wake, k.meta], [job_id, payload])


_ADMIT = _layout("admit", ("job", "pending", "delayed", "lanes", "meta", "wake"),
                 ("id", "payload", "lane", "delay_ms", "serial", "max_attempts"))


def admit(k: QueueKeys, job_id: str, payload: bytes, *, lane: str, delay_ms: int, serial: bool,
          max_attempts: int | None) -> Call:
    return Call(_ADMIT, [k.job(job_id), k.pending, k.delayed, k.lanes, k.meta, k.wake],
                [job_id, payload, lane, delay_ms, "1" if serial else "0",
                 "" if max_attempts is None else max_attempts])


_FENCE = _layout("fence", ("meta",), ("version",))


def fence(k: QueueKeys, version: str) -> Call:
    return Call(_FENCE, [k.meta], [version])


_CLAIM = _layout("claim", ("pending", "active", "lanes", "meta", "inflight", "jobs"),
                 ("lease_ms", "count", "ids"))


def claim(k: QueueKeys, ids: Sequence[bytes | str], *, count: int, lease_ms: int) -> Call:
    keys = [k.pending, k.active, k.lanes, k.meta, k.inflight]
    keys += [k.job_prefix + _text(i) for i in ids]
    return Call(_CLAIM, keys, [lease_ms, count, *ids])


_HEARTBEAT = _layout("heartbeat", ("active", "job", "meta"), ("id", "attempt", "lease_ms"))


def heartbeat(k: QueueKeys, lease: Lease, *, lease_ms: int) -> Call:
    return Call(_HEARTBEAT, [k.active, k.job(lease.id), k.meta], [lease.id, lease.attempt, lease_ms])


_COMPLETE = _layout("complete", ("active", "job", "done", "inflight", "meta"),
                    ("id", "attempt", "keep_ms", "result"))


def complete(k: QueueKeys, lease: Lease, *, keep_ms: int, result: bytes) -> Call:
    return Call(_COMPLETE, [k.active, k.job(lease.id), k.done, k.inflight, k.meta],
                [lease.id, lease.attempt, keep_ms, result])


_COMPLETE_BATCH = _layout("complete_batch", ("active", "done", "inflight", "meta", "jobs"),
                          ("keep_ms", "attempts"))


def complete_batch(k: QueueKeys, finished: Sequence[tuple[Lease, bytes]], *, keep_ms: int) -> Call:
    keys = [k.active, k.done, k.inflight, k.meta]
    args: list[str | bytes | int] = [keep_ms]
    for lease, result in finished:
        keys.append(k.job(lease.id))
        args += (lease.id, lease.attempt, result)
    return Call(_COMPLETE_BATCH, keys, args)


_RETRY = _layout("retry", ("active", "job", "delayed", "dead", "inflight", "pending", "lanes",
                           "meta", "wake"),
                 ("id", "attempt", "delay_ms", "max_attempts", "error", "mode"))


def retry(k: QueueKeys, lease: Lease, *, delay_ms: int, max_attempts: int, error: str,
          mode: str) -> Call:
    return Call(_RETRY, [k.active, k.job(lease.id), k.delayed, k.dead, k.inflight, k.pending,
                         k.lanes, k.meta, k.wake],
                [lease.id, lease.attempt, delay_ms, max_attempts, error, mode])


_PROMOTE = _layout("promote", ("delayed", "pending", "lanes", "meta", "wake", "inflight", "jobs"),
                   ("ids",))


def promote(k: QueueKeys, ids: Sequence[bytes | str]) -> Call:
    keys = [k.delayed, k.pending, k.lanes, k.meta, k.wake, k.inflight]
    return Call(_PROMOTE, keys + [k.job_prefix + _text(i) for i in ids], list(ids))


_REAP = _layout("reap", ("active", "pending", "dead", "lanes", "meta", "inflight", "wake", "jobs"),
                ("max_attempts", "ids"))


def reap(k: QueueKeys, ids: Sequence[bytes | str], *, max_attempts: int) -> Call:
    keys = [k.active, k.pending, k.dead, k.lanes, k.meta, k.inflight, k.wake]
    return Call(_REAP, keys + [k.job_prefix + _text(i) for i in ids], [max_attempts, *ids])


_PURGE = _layout("purge", ("set", "meta", "jobs"), ("state", "min_age_ms", "ids"))


def purge(k: QueueKeys, state: str, ids: Sequence[bytes | str], *, min_age_ms: int) -> Call:
    keys = [k.state(state), k.meta, *(k.job_prefix + _text(i) for i in ids)]
    return Call(_PURGE, keys, [state, min_age_ms, *ids])


_REQUEUE = _layout("requeue", ("dead", "pending", "lanes", "meta", "wake", "jobs"), ("ids",))


def requeue(k: QueueKeys, ids: Sequence[bytes | str]) -> Call:
    keys = [k.dead, k.pending, k.lanes, k.meta, k.wake]
    return Call(_REQUEUE, keys + [k.job_prefix + _text(i) for i in ids], list(ids))


_CANCEL = _layout("cancel", ("pending", "delayed", "inflight", "meta", "jobs"), ("ids",))


def cancel(k: QueueKeys, ids: Sequence[bytes | str]) -> Call:
    keys = [k.pending, k.delayed, k.inflight, k.meta]
    return Call(_CANCEL, keys + [k.job_prefix + _text(i) for i in ids], list(ids))


_TRACE_ATTACH = _layout("trace_attach", ("job", "meta"), ("traceparent",))


def trace_attach(k: QueueKeys, job_id: str, traceparent: str) -> Call:
    return Call(_TRACE_ATTACH, [k.job(job_id), k.meta], [traceparent])


_BROWSE = _layout("browse", ("set", "meta", "jobs"), ("ids",))


def browse(k: QueueKeys, state: str, ids: Sequence[bytes | str]) -> Call:
    keys = [k.state(state), k.meta, *(k.job_prefix + _text(i) for i in ids)]
    return Call(_BROWSE, keys, list(ids))


_STATS = _layout("stats", ("pending", "active", "delayed", "done", "dead", "meta"), ())


def stats(k: QueueKeys) -> Call:
    return Call(_STATS, [k.pending, k.active, k.delayed, k.done, k.dead, k.meta], [])


_PEEK = _layout("peek", ("set", "meta"), ("start", "count"))


def peek(k: QueueKeys, state: str, *, start: int, count: int) -> Call:
    return Call(_PEEK, [k.state(state), k.meta], [start, count])


_ROW = _layout("row", ("job", "meta"), ("id",))


def row(k: QueueKeys, job_id: str) -> Call:
    return Call(_ROW, [k.job(job_id), k.meta], [job_id])


def decode_row(flat: Any) -> dict[str, bytes] | None:
    flat = _raise_if_error(flat)
    return {_text(flat[i]): flat[i + 1] for i in range(0, len(flat), 2)} or None


def decode_ids(reply: Any) -> list[bytes]:
    return list(_raise_if_error(reply))


_PENDING_SIZE = _layout("pending_size", ("pending", "meta"), ())


def pending_size(k: QueueKeys) -> Call:
    return Call(_PENDING_SIZE, [k.pending, k.meta], [])


# ------------------------------------------------------------------ decoders
def _raise_if_error(reply: Any) -> Any:
    if isinstance(reply, BaseException):
        raise reply
    return reply


def decode_verdict(reply: object) -> Verdict | EchoMQError:
    """One reply of enqueue/admit: its verdict (EMQKIND is the KIND verdict), or the error."""
    if isinstance(reply, BaseException):
        if code_of(reply) == "EMQKIND":
            return Verdict.KIND
        if isinstance(reply, EchoMQError):
            return reply
        return ServerError(f"unexpected admission reply: {reply!r}")
    if reply == 1:
        return Verdict.ENQUEUED
    if reply == 0:
        return Verdict.DUPLICATE
    return ServerError(f"unexpected admission reply: {reply!r}")


def decode_completion(reply: Any) -> Completion:
    return Completion.COMPLETED if _raise_if_error(reply) == 1 else Completion.STALE


def decode_completions(replies: Sequence[Any]) -> list[Completion]:
    """complete_batch replies flattened into one verdict per attempt (errors raised)."""
    out = []
    for reply in replies:
        out += [Completion.COMPLETED if r == 1 else Completion.STALE for r in _raise_if_error(reply)]
    return out


def decode_leases(queue: str, flat: Any) -> list[Lease]:
    flat = _raise_if_error(flat)
    return [
        Lease(queue=queue, id=_text(flat[i]), attempt=int(flat[i + 1]), payload=flat[i + 2] or b"",
              lane=_text(flat[i + 3]) or None, deadline_ms=int(flat[i + 4]))
        for i in range(0, len(flat), 5)
    ]


def decode_deadline(reply: Any) -> int | None:
    return int(_raise_if_error(reply)) or None


def decode_retry(reply: Any) -> RetryOutcome:
    reply = _raise_if_error(reply)
    return {1: RetryOutcome.SCHEDULED, 2: RetryOutcome.DEAD}.get(reply, RetryOutcome.STALE)


def decode_count(reply: Any) -> int:
    return int(_raise_if_error(reply))


def decode_reap(reply: Any) -> tuple[int, int]:
    requeued, dead = _raise_if_error(reply)
    return int(requeued), int(dead)


class Bulk(int):
    """How many jobs one bulk call acted on (it *is* that int), and how many are left in
    the set it pages through (``remaining``): call again while ``remaining`` is not 0."""

    remaining: int

    def __new__(cls, acted: int, remaining: int) -> Bulk:
        self = super().__new__(cls, acted)
        self.remaining = remaining
        return self

    def __repr__(self) -> str:
        return f"Bulk({int(self)}, remaining={self.remaining})"

    def __str__(self) -> str:  # formats as the number it is
        return str(int(self))


def decode_bulk(reply: Any) -> Bulk:
    acted, remaining = _raise_if_error(reply)
    return Bulk(int(acted), int(remaining))


def decode_stats(reply: Any) -> Stats:
    return Stats(*(int(c) for c in _raise_if_error(reply)))


def decode_views(flat: Any) -> list[JobView]:
    flat = _raise_if_error(flat)
    views = []
    for i in range(0, len(flat), 3):
        fields = flat[i + 2]
        row = {_text(fields[j]): fields[j + 1] for j in range(0, len(fields), 2)}
        views.append(JobView(id=_text(flat[i]), score=float(flat[i + 1]), row=row))
    return views
