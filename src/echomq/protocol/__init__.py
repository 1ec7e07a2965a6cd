"""The EchoMQ protocol, pure (no I/O): bounds, script calls, reply decoders, error codes.

For every Lua script there is one *builder* (named parameters in, a :class:`Call` out,
its KEYS and ARGV in the order the script's contract header declares, checked once at
import; :mod:`echomq.protocol.calls`) and one *decoder* (a raw reply in, a typed value out;
:mod:`echomq.protocol.decoders`). Connectors only send calls; queues only build and decode.
This module is their one face (``from echomq import protocol as p``), with the bounds
and the table of error codes. ``docs/protocol.md`` is the prose of this module.

Bounds (checked before any I/O; outside them :class:`~echomq.core.errors.InvalidArgument`):

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
leases a call      1 .. 256 (``MAX_BEATS``)     one ``heartbeat_batch``; ``heartbeat_many``
                                                sends one call per 256
``offset``         0 .. 2**53                   a position in a state's set
lane               1 .. 256 characters (str)    ``None`` for no lane
=================  ===========================  ======================================

Error replies carry a stable code as their first word; :data:`ERROR_CODES` maps each
code a script emits to its exception (tests/echomq/test_protocol.py checks that the
table and the Lua agree).
"""

from __future__ import annotations

from echomq.core.bounds import (
    MAX_ATTEMPTS,
    MAX_BEAT_MS,
    MAX_BEATS,
    MAX_COUNT,
    MAX_DELAY_MS,
    MAX_KEEP_MS,
    MAX_LANE,
    MAX_LEASE_MS,
    MAX_OFFSET,
    MAX_PAGE,
    MAX_WINDOW,
    check_expiry,
    check_int,
)
from echomq.protocol.calls import (
    Call,
    admit,
    browse,
    cancel,
    claim,
    complete,
    complete_batch,
    deduped,
    enqueue,
    enqueue_batch,
    expire,
    fence,
    heartbeat,
    heartbeat_batch,
    layout,
    limits,
    pause,
    peek,
    pending_size,
    progress,
    promote,
    purge,
    reap,
    requeue,
    retry,
    row,
    stats,
    trace_attach,
)
from echomq.protocol.codes import (
    ERROR_CODES,
    check_lane,
    check_lease,
    check_payload,
    code_of,
    error_from_reply,
)
from echomq.protocol.decoders import (
    Bulk,
    Deadline,
    Reaped,
    decode_bulk,
    decode_cancels,
    decode_completion,
    decode_completions,
    decode_count,
    decode_deadline,
    decode_deadlines,
    decode_deduped,
    decode_expire,
    decode_ids,
    decode_leases,
    decode_progress,
    decode_reap,
    decode_retry,
    decode_row,
    decode_stats,
    decode_verdict,
    decode_views,
    deduped_retry,
)
from echomq.protocol.dedupe import Window, check_window, dedupe_lane
from echomq.protocol.encoded import BATCH, BatchEnqueuer, Enqueuer, batch_size
from echomq.protocol.keyspace import STATES, QueueKeys

__all__ = [
    "BATCH",
    "ERROR_CODES",
    "MAX_ATTEMPTS",
    "MAX_BEATS",
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
    "BatchEnqueuer",
    "Bulk",
    "Call",
    "Deadline",
    "Enqueuer",
    "QueueKeys",
    "Reaped",
    "Window",
    "admit",
    "batch_size",
    "browse",
    "cancel",
    "check_expiry",
    "check_int",
    "check_lane",
    "check_lease",
    "check_payload",
    "check_window",
    "claim",
    "code_of",
    "complete",
    "complete_batch",
    "decode_bulk",
    "decode_cancels",
    "decode_completion",
    "decode_completions",
    "decode_count",
    "decode_deadline",
    "decode_deadlines",
    "decode_deduped",
    "decode_expire",
    "decode_ids",
    "decode_leases",
    "decode_progress",
    "decode_reap",
    "decode_retry",
    "decode_row",
    "decode_stats",
    "decode_verdict",
    "decode_views",
    "dedupe_lane",
    "deduped",
    "deduped_retry",
    "enqueue",
    "enqueue_batch",
    "error_from_reply",
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
