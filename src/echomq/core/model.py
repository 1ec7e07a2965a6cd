"""The values EchoMQ hands back: verdicts, leases, outcomes, options. Pure."""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass, field

from echomq.core.bounds import MAX_ATTEMPTS, MAX_ERROR, MAX_KEEP_MS, MAX_PAGE, MAX_RESULT, check_int

__all__ = [
    "PROTOCOL",
    "CancelOutcome",
    "CancelToken",
    "Completion",
    "JobView",
    "Lease",
    "ProgressOutcome",
    "QueueOptions",
    "RetryOutcome",
    "Stats",
    "Verdict",
]

PROTOCOL = "echomq:3.0.0"
"""The keyspace protocol this client speaks; a queue records it on first write (docs/protocol.md,
"Version fence")."""


class Verdict(enum.Enum):
    """What admission did with one job (docs/protocol.md, "Admission")."""

    ENQUEUED = "enqueued"
    DUPLICATE = "duplicate"  # the id was already known; the existing row is untouched
    KIND = "kind"  # the id is not JOB-namespaced (EMQKIND); nothing was written
    REPLACED = "replaced"  # debounce: the waiting holder of the dedupe key took this payload


class Completion(enum.Enum):
    COMPLETED = "completed"
    CANCELLED = "cancelled"  # a cancel was asked for while it ran: it ended cancelled, not done
    STALE = "stale"  # the attempt no longer holds the job: nothing changed


class RetryOutcome(enum.Enum):
    SCHEDULED = "scheduled"  # back to delayed (or pending when the delay is 0)
    DEAD = "dead"  # the failure limit was reached: in the dead set with its last error
    CANCELLED = "cancelled"  # a cancel was asked for while it ran: it ended cancelled
    STALE = "stale"


class CancelOutcome(enum.Enum):
    """What ``cancel`` did with one job (the ``cancel`` script, one step per job)."""

    CANCELLED = "cancelled"  # it was waiting (pending or delayed): it ended cancelled now
    ASKED = "asked"  # it is running: its attempt is asked to stop and will end cancelled
    LEFT = "left"  # it had already ended (done, dead, cancelled) or is unknown: unchanged


class ProgressOutcome(enum.Enum):
    """What ``report_progress`` did (the ``progress`` script, fenced by the attempt)."""

    RECORDED = "recorded"
    STOP = "stop"  # recorded, and a cancel was asked for: the attempt should stop
    STALE = "stale"  # the attempt no longer holds a live lease: refused, nothing written


class CancelToken:
    """Set when the job of a running attempt is asked to stop (``cancel``). The consumer
    sets it when a heartbeat reports the ask; a handler polls :meth:`is_set` or blocks in
    :meth:`wait` (a thread), or an ``async def`` handler is cancelled outright.

    Every lease carries one, and almost none is ever waited on: the ``threading.Event``
    behind :meth:`wait` is made on the first wait (a flag answers :meth:`is_set`), so a
    lease costs no lock and no condition (~7 µs of the drain's client CPU per job)."""

    __slots__ = ("_event", "_set")

    def __init__(self) -> None:
        self._set = False
        self._event: threading.Event | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        self._set = True  # before reading _event: a waiter making it sees the flag
        event = self._event
        if event is not None:
            event.set()

    def wait(self, timeout: float | None = None) -> bool:
        if self._set:
            return True
        event = self._event
        if event is None:
            with _TOKEN_LOCK:  # one Event per token, even when two threads wait at once
                if self._event is None:
                    self._event = threading.Event()
                event = self._event
        if self._set:  # set() ran before the Event existed: it could not set it
            event.set()
        return event.wait(timeout)

    def __repr__(self) -> str:
        return f"CancelToken(set={self.is_set()})"


_TOKEN_LOCK = threading.Lock()


@dataclass(frozen=True, slots=True)
class Lease:
    """One claimed attempt. ``attempt`` is the fencing token every later call presents;
    ``cancel`` is set when the job is asked to stop (not part of equality)."""

    queue: str
    id: str
    attempt: int
    payload: bytes
    lane: str | None
    deadline_ms: int
    cancel: CancelToken = field(default_factory=CancelToken, compare=False, repr=False)
    timeout_ms: int | None = None  # the job's own handler timeout (admit), else the consumer's


_LEASE_SETTERS = tuple(getattr(Lease, f).__set__ for f in (
    "queue", "id", "attempt", "payload", "lane", "deadline_ms", "cancel", "timeout_ms"))


def new_lease(queue: str, id: str, attempt: int, payload: bytes, lane: str | None,
              deadline_ms: int, timeout_ms: int | None) -> Lease:
    """``Lease(...)`` as a claim's decoder makes it, without the frozen dataclass's
    ``__init__`` (one ``object.__setattr__`` per field: ~3.5 µs a lease here; the slots'
    own setters: ~0.7 µs, a tenth of the drain's client CPU per job). Equal to the
    keyword construction (``tests/echomq/test_cancel_token.py``)."""
    lease = object.__new__(Lease)
    sq, si, sa, sp, sl, sd, sc, st = _LEASE_SETTERS
    sq(lease, queue)
    si(lease, id)
    sa(lease, attempt)
    sp(lease, payload)
    sl(lease, lane)
    sd(lease, deadline_ms)
    sc(lease, CancelToken())
    st(lease, timeout_ms)
    return lease


@dataclass(frozen=True, slots=True)
class JobView:
    """A job's row as ``browse`` read it."""

    id: str
    score: float
    row: dict[str, bytes]

    @property
    def state(self) -> str:
        return self.row.get("state", b"").decode()

    @property
    def attempts(self) -> int:
        return int(self.row.get("attempts", b"0"))


@dataclass(frozen=True, slots=True)
class Stats:
    pending: int
    active: int
    delayed: int
    done: int
    dead: int
    expired: int = 0  # never started by their deadline (admit's expires_ms, decision 0045)

    @property
    def total(self) -> int:
        return self.pending + self.active + self.delayed + self.done + self.dead + self.expired


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueOptions:
    """How a queue treats its jobs. Every number has a reason.

    * ``max_payload``: 512 KiB. Larger payloads belong in a blob store; a big value
      stalls the single-threaded server for every other client.
    * ``max_result``: 512 KiB (the protocol's ceiling, ``echomq.bounds.MAX_RESULT``), the
      bytes a completion may keep as the job's result; ``max_error``: 64 KiB (ceiling
      ``MAX_ERROR``), the text a failed attempt may keep. Over them ``complete``,
      ``complete_many`` and ``retry`` raise :class:`~echomq.errors.PayloadTooLarge`
      before any I/O (a consumer cuts a handler's error text to ``max_error`` instead);
      the scripts refuse more than the ceilings from any client (``EMQARG``). Past the
      server's ``maxmemory`` a call keeps at most 1 KiB of them (docs/protocol.md, "Bounds").
    * ``keep_done_ms``: finished rows are kept one hour, so an id keeps refusing
      duplicates for an hour after its job completed; 0 deletes at completion.
    * ``keep_dead_ms``: dead rows are kept seven days for inspection and requeue.
    * ``keep_expired_ms``: rows of jobs that expired unstarted (admit's ``expires_ms``)
      are kept seven days, as failures are: retention per state, so failures and
      expiries outlive successes (docs/decisions/0045-expiry.md).
    * ``max_attempts``: a job that fails (or loses its lease) this many times is dead
      (1..10,000).
    * Ranges: ``keep_*_ms`` 0..366 days, ``reap_batch`` 1..10,000; outside them
      :class:`~echomq.core.errors.InvalidArgument`. There is no switch for the protocol
      version fence: every script checks it (docs/decisions/0011).
    * ``batch``: enqueue_many sends at most this many items per flush, and promote,
      reap and purge handle at most this many jobs per script call, so no call holds
      the server for more than a few milliseconds.
    * ``durable_replicas``: 0 (off). If n > 0, every admission is followed by
      ``WAIT n durable_timeout_ms`` on the same connection, and a job fewer than n
      replicas acknowledged is reported :class:`~echomq.core.errors.NotDurable`, not
      ENQUEUED: asynchronous replication loses acknowledged writes on a partition
      or failover otherwise (docs/cluster.md). ``durable_timeout_ms``: 500, long
      enough for a loaded replica (WAIT answers in ~0.2 ms when healthy), short
      enough to fail an admission clearly while a replica is down.
    """

    max_payload: int = 512 * 1024
    max_result: int = MAX_RESULT
    max_error: int = MAX_ERROR
    keep_done_ms: int = 3_600_000
    keep_dead_ms: int = 7 * 24 * 3_600_000
    keep_expired_ms: int = 7 * 24 * 3_600_000
    max_attempts: int = 5
    batch: int = 1000
    reap_batch: int = 100
    durable_replicas: int = 0
    durable_timeout_ms: int = 500

    def __post_init__(self) -> None:
        # WAIT with timeout 0 would block forever, hence durable_timeout_ms >= 1.
        check_int("durable_replicas", self.durable_replicas, 0, 64)
        check_int("durable_timeout_ms", self.durable_timeout_ms, 1, 60_000)
        check_int("max_payload", self.max_payload, 1, 512 * 1024 * 1024)
        check_int("max_attempts", self.max_attempts, 1, MAX_ATTEMPTS)
        check_int("max_result", self.max_result, 0, MAX_RESULT)
        check_int("max_error", self.max_error, 0, MAX_ERROR)
        check_int("batch", self.batch, 1, 100_000)
        check_int("reap_batch", self.reap_batch, 1, MAX_PAGE)
        check_int("keep_done_ms", self.keep_done_ms, 0, MAX_KEEP_MS)
        check_int("keep_dead_ms", self.keep_dead_ms, 0, MAX_KEEP_MS)
        check_int("keep_expired_ms", self.keep_expired_ms, 0, MAX_KEEP_MS)

