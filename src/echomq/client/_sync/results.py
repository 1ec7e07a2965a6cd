# Generated from echomq/client/_async/results.py by scripts/unasync_gen.py. Do not edit.
"""Results, progress and waiting for a job to end (docs/decisions/0023).

A job *ends* done (its result is the bytes its handler returned, kept with the row for the
done retention), dead (its result is its last error: :class:`~echomq.core.errors.JobFailed`) or
cancelled (:class:`~echomq.core.errors.JobCancelled`) or expired, never started by its
deadline (:class:`~echomq.core.errors.JobExpired`, decision 0045). :func:`wait_result` waits for that end
without polling: it subscribes to the queue's ``finished`` shard channel (``SSUBSCRIBE``,
one slot with the queue, so legal on a cluster), waits for the subscription to be
confirmed, and only then reads the row; every script that ends a job tells the channel in
the same step. A job that ends before the read is seen by the read; one that ends after
it is told on a channel the waiter already listens to: no end is missed between the check
and the wait. A shard channel is not a key: waiting leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from echomq import protocol as p
from echomq.client._sync.seam import ScriptConnector
from echomq.client.replies import classify
from echomq.core.errors import (
    EchoMQError,
    InvalidArgument,
    JobCancelled,
    JobExpired,
    JobFailed,
    JobNotFound,
    ResultTimeout,
)

__all__ = ["ended", "read_progress", "wait_result"]

_MAX_WAIT_S = 86_400.0  # one day: a longer wait belongs in a loop of the caller's
_SLICE_S = 5.0  # the longest single read of the channel: a dead connection shows by then


def ended(job_id: str, row: dict[str, bytes] | None) -> bytes | None:
    """A job's result if it ended done; raises if it ended otherwise (or has no row);
    None while it has not ended (pending, delayed, active)."""
    if row is None:
        raise JobNotFound(f"no job {job_id}: never admitted, or its row is gone", job_id=job_id)
    state = row.get("state", b"").decode()
    if state == "done":
        return row.get("result", b"")
    if state == "dead":
        error = row.get("error", b"").decode(errors="replace")
        raise JobFailed(f"job {job_id} is dead: {error.splitlines()[0] if error else 'no error kept'}",
                        job_id=job_id, error=error, failures=int(row.get("failures", b"0")))
    if state == "cancelled":
        raise JobCancelled(f"job {job_id} was cancelled", job_id=job_id)
    if state == "expired":
        deadline = int(row.get("exp", b"0"))
        raise JobExpired(f"job {job_id} expired: it did not start by its deadline ({deadline} server ms)",
                         job_id=job_id, deadline_ms=deadline)
    return None


def _row(connector: ScriptConnector, k: p.QueueKeys,
               job_id: str) -> dict[str, bytes] | None:
    return p.decode_row(connector.run(p.row(k, job_id)))


def read_progress(connector: ScriptConnector, k: p.QueueKeys,
                        job_id: str) -> bytes | None:
    """The last progress report of a job (None if none was made); JobNotFound without a row."""
    row = _row(connector, k, job_id)
    if row is None:
        raise JobNotFound(f"no job {job_id}: never admitted, or its row is gone", job_id=job_id)
    return row.get("progress")


def _told(msg: Any, want: bytes) -> bool:
    data = msg.get("data") if isinstance(msg, dict) else None
    return isinstance(data, bytes) and want in data.split(b" ")


def wait_result(connector: ScriptConnector, k: p.QueueKeys,
                      job_id: str, timeout: float | None) -> bytes:  # noqa: ASYNC109, RUF100 (the API asks for timeout=)
    """Wait until ``job_id`` ends and return its result (see the module docstring).

    ``timeout`` in seconds (0..86400; None waits without end; 0 only looks). Raises
    ResultTimeout when it has not ended in time, JobFailed (dead), JobCancelled, JobExpired, or
    JobNotFound (no row: never admitted, or not kept).
    """
    k.job(job_id)
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float)
                                or not 0 <= timeout <= _MAX_WAIT_S):
        raise InvalidArgument(f"timeout must be None or seconds in 0..{_MAX_WAIT_S:.0f}, not {timeout!r}")
    until = None if timeout is None else time.monotonic() + timeout
    row = _row(connector, k, job_id)
    result = ended(job_id, row)
    if result is not None:
        return result
    want = job_id.encode()
    sub: Any = None
    try:
        while True:
            left = _SLICE_S if until is None else min(_SLICE_S, until - time.monotonic())
            if left <= 0:
                state = (row or {}).get("state", b"").decode()
                raise ResultTimeout(f"job {job_id} did not end within {timeout} s (it is {state})",
                                    job_id=job_id, state=state)
            try:
                if sub is None:
                    sub = connector.wake_subscription(k.finished)
                    _confirmed(sub, until)
                    told = True  # subscribed now: the row read below sees any end before it
                else:
                    told = _told(sub.get_message(timeout=left), want)
                if told:
                    row = _row(connector, k, job_id)
                    result = ended(job_id, row)
                    if result is not None:
                        return result
            except EchoMQError as exc:
                if not classify(exc).kind.retry:
                    raise
                _close(sub)  # the channel's node was lost: subscribe again
                sub = None
                _pause(until)
    finally:
        _close(sub)


def _confirmed(sub: Any, until: float | None) -> None:
    """Read until the server confirms the subscription: from then on it is told every end."""
    while True:
        left = _SLICE_S if until is None else max(0.001, until - time.monotonic())
        msg = sub.get_message(ignore_subscribe_messages=False, timeout=left)
        if isinstance(msg, dict) and msg.get("type") in ("ssubscribe", b"ssubscribe"):
            return
        if msg is None and until is not None and time.monotonic() >= until:
            return  # out of time: the caller reads the row once more and gives up


def _close(sub: Any) -> None:
    if sub is not None:
        with contextlib.suppress(EchoMQError):  # the connection may be lost already
            sub.close()


def _pause(until: float | None) -> None:
    left = 0.2 if until is None else min(0.2, max(0.0, until - time.monotonic()))
    time.sleep(left)
