"""Reply decoders of the EchoMQ protocol, pure (no I/O): a raw reply in, a typed value out.

One decoder per script reply shape; the same decoder runs on a reply that came back
alone and on one that came back in place inside a pipeline (an error reply in place is
raised here, as its typed :class:`~echomq.core.errors.EchoMQError`). :func:`text` is the one
bytes-or-str reading of a reply word, shared by every module that reads one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from echomq.core.errors import EchoMQError, ServerError
from echomq.core.model import CancelOutcome, Completion, JobView, RetryOutcome, Stats, Verdict, new_lease
from echomq.protocol.gate import Claimed

__all__ = [
    "Bulk",
    "Deadline",
    "Reaped",
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
    "deduped_retry",
    "text",
]


def text(value: Any) -> str:
    """A reply word as str: bytes decoded as UTF-8 (an undecodable byte shown as U+FFFD,
    never an error: a reply is displayed or compared, not trusted), else ``str()``-ed."""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _raise_if_error(reply: Any) -> Any:
    if isinstance(reply, BaseException):
        raise reply
    return reply


def decode_row(flat: Any) -> dict[str, bytes] | None:
    flat = _raise_if_error(flat)
    return {text(flat[i]): flat[i + 1] for i in range(0, len(flat), 2)} or None


def decode_ids(reply: Any) -> list[bytes]:
    return list(_raise_if_error(reply))


def decode_verdict(reply: object) -> Verdict | EchoMQError:
    """One reply of enqueue/admit: its verdict (EMQKIND is the KIND verdict), or the error."""
    if isinstance(reply, BaseException):
        if getattr(reply, "code", None) == "EMQKIND":
            return Verdict.KIND
        if isinstance(reply, EchoMQError):
            return reply
        return ServerError(f"unexpected admission reply: {reply!r}")
    if reply == 1:
        return Verdict.ENQUEUED
    if reply == 0:
        return Verdict.DUPLICATE
    return ServerError(f"unexpected admission reply: {reply!r}")


_DEDUPED = {1: Verdict.ENQUEUED, 0: Verdict.DUPLICATE, 2: Verdict.REPLACED}


def decode_deduped(reply: object) -> tuple[Verdict | EchoMQError, str | None]:
    """One reply of throttle/debounce: its verdict (or error) and the id of the job that
    holds the dedupe key now (None with an error; a debounce's 3, "ask again with this
    holder", comes back as (DUPLICATE, holder) only from :func:`deduped_retry`)."""
    if isinstance(reply, list) and len(reply) == 2 and reply[0] in _DEDUPED:
        return _DEDUPED[reply[0]], text(reply[1])
    if isinstance(reply, BaseException):
        return decode_verdict(reply), None
    return ServerError(f"unexpected admission reply: {reply!r}"), None


def deduped_retry(reply: object) -> str | None:
    """The holder a debounce reply names when it asks to be sent again (its 3), else None."""
    if isinstance(reply, list) and len(reply) == 2 and reply[0] == 3:
        return text(reply[1])
    return None


_COMPLETIONS = {1: Completion.COMPLETED, 2: Completion.CANCELLED}


def decode_completion(reply: Any) -> Completion:
    return _COMPLETIONS.get(_raise_if_error(reply), Completion.STALE)


_CANCELS = {1: CancelOutcome.CANCELLED, 2: CancelOutcome.ASKED}


def decode_cancels(reply: Any) -> list[CancelOutcome]:
    """One outcome per id of a ``cancel`` call, in order."""
    return [_CANCELS.get(r, CancelOutcome.LEFT) for r in _raise_if_error(reply)]


def decode_progress(reply: Any) -> int:
    """``progress``: 1 recorded, 2 recorded and asked to stop, 0 stale."""
    return int(_raise_if_error(reply))


def decode_completions(replies: Sequence[Any]) -> list[Completion]:
    """complete_batch replies flattened into one verdict per attempt (errors raised)."""
    out = []
    for reply in replies:
        out += [_COMPLETIONS.get(r, Completion.STALE) for r in _raise_if_error(reply)]
    return out


def decode_leases(queue: str, flat: Any) -> Claimed:
    """A claim's reply: the leases' deadline, the fields per lease (3 in a plain queue: id,
    attempt, payload; else 5: lane and the job's own handler timeout too, '' for none),
    the leases, then (when the gate held a job back) -1 for a paused queue or the ms until
    the next rate token is due."""
    flat = _raise_if_error(flat)
    deadline, stride = int(flat[0]), int(flat[1])
    body = len(flat) - 2
    held = int(flat[-1]) if body % stride == 1 else None
    end = 2 + body - body % stride
    # new_lease: Lease(...) without the frozen __init__'s cost, the same value
    if stride == 3:
        leases = [new_lease(queue, text(flat[i]), int(flat[i + 1]), flat[i + 2] or b"", None, deadline, None)
                  for i in range(2, end, 3)]
    else:
        leases = [new_lease(queue, text(flat[i]), int(flat[i + 1]), flat[i + 2] or b"",
                            text(flat[i + 3]) or None, deadline, int(flat[i + 4]) if flat[i + 4] else None)
                  for i in range(2, end, 5)]
    return Claimed(leases, paused=held == -1, wait_ms=held if held is not None and held >= 0 else None)


class Deadline(int):
    """A heartbeat's new lease deadline (server ms; it *is* that int), and whether a cancel
    was asked for (``cancel``): the attempt should stop, and it ends cancelled."""

    cancel: bool

    def __new__(cls, deadline: int, cancel: bool) -> Deadline:
        self = super().__new__(cls, deadline)
        self.cancel = cancel
        return self

    def __repr__(self) -> str:
        return f"Deadline({int(self)}, cancel={self.cancel})"


def decode_deadline(reply: Any) -> Deadline | None:
    """The heartbeat reply: None when the lease is lost; a negative deadline means the
    lease was extended and a cancel was asked for (the ``heartbeat`` script's contract)."""
    n = int(_raise_if_error(reply))
    return Deadline(abs(n), n < 0) if n else None


def decode_deadlines(replies: Sequence[Any]) -> list[Deadline | None]:
    """heartbeat_batch replies flattened into one deadline (or None: lost) per lease, in
    order, each decoded as :func:`decode_deadline` decodes a heartbeat's (errors raised)."""
    out: list[Deadline | None] = []
    for reply in replies:
        out += [decode_deadline(r) for r in _raise_if_error(reply)]
    return out


def decode_retry(reply: Any) -> RetryOutcome:
    reply = _raise_if_error(reply)
    return {1: RetryOutcome.SCHEDULED, 2: RetryOutcome.DEAD,
            3: RetryOutcome.CANCELLED}.get(reply, RetryOutcome.STALE)


def decode_count(reply: Any) -> int:
    return int(_raise_if_error(reply))


class Reaped(tuple[int, int]):
    """What one reap did: ``(requeued, dead)`` (it *is* that pair), and ``cancelled``, the
    expired jobs that had been asked to stop and ended cancelled."""

    cancelled: int

    def __new__(cls, requeued: int, dead: int, cancelled: int = 0) -> Reaped:
        self = super().__new__(cls, (requeued, dead))
        self.cancelled = cancelled
        return self


def decode_reap(reply: Any) -> Reaped:
    requeued, dead, cancelled = _raise_if_error(reply)
    return Reaped(int(requeued), int(dead), int(cancelled))


def decode_expire(reply: Any) -> tuple[int, int]:
    """An ``expire`` call's (expired, dropped): jobs that ended expired, and index entries
    dropped because their job no longer waits."""
    expired, dropped = _raise_if_error(reply)
    return int(expired), int(dropped)


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
        row = {text(fields[j]): fields[j + 1] for j in range(0, len(fields), 2)}
        views.append(JobView(id=text(flat[i]), score=float(flat[i + 1]), row=row))
    return views
