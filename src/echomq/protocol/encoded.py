"""Admission calls with their RESP request already encoded (pure, no I/O).

Bulk admission's client cost is encoding: through the generic encoder
(:func:`echomq.client._wire.pack_evalsha`) every argument is a step of its own. The builders
here encode every byte that does not depend on the job once per queue, and a call's
request is a few joins around the ids and payloads; the call's ``wire`` field carries
those bytes and the connector sends them as they are (docs/decisions/0005 and 0027).
The keys and arguments are exactly those of :func:`echomq.protocol.calls.enqueue` and
:func:`echomq.protocol.calls.enqueue_batch` (``tests/echomq/test_wire.py`` checks the bytes are
the generic encoder's).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Sequence
from typing import Any

from echomq.core.ids import _ID, ALPHABET, KIND_LENGTH, TAIL_LENGTH
from echomq.protocol.calls import _ENQUEUE, _ENQUEUE_BATCH, Call, call_token
from echomq.protocol.keyspace import QueueKeys

__all__ = ["BATCH", "ID_LENGTH", "BatchEnqueuer", "Enqueuer", "batch_size"]

ID_LENGTH = KIND_LENGTH + TAIL_LENGTH  # every valid id has this many characters (all ASCII)
BATCH = 256
"""Jobs per ``enqueue_batch`` call at most (docs/decisions/0027-batch-admission.md)."""
_MIN_BATCH = 32
_ID_SHAPE = _ID.fullmatch  # ids.valid's test, without its call
_JOB_IDS = re.compile(rf"(?:JOB[0-7][{ALPHABET}]{{25}}\n)*")  # ids of the JOB kind, one a line


def batch_size(n: int, most: int = BATCH) -> int:
    """Jobs per ``enqueue_batch`` call for a run of ``n`` plain jobs: at most ``most``
    (and :data:`BATCH`), else a quarter of the run (at least 32), so a run of 1,000 still
    goes out as four calls, two in flight: the server runs one while the client builds
    the next. ``bench/limit.py`` measures the server on exactly these calls."""
    return max(1, min(most, BATCH, max(_MIN_BATCH, -(-n // 4))))


def _bulk(value: str) -> bytes:
    data = value.encode()
    return b"$%d\r\n%b\r\n" % (len(data), data)


class Enqueuer:
    """:func:`~echomq.protocol.calls.enqueue` calls of one queue, each with its request in ``wire``
    (~0.5 µs a call). ``job_id`` is checked as :func:`~echomq.protocol.calls.enqueue` checks it,
    ``payload`` must already be checked bytes."""

    __slots__ = ("_head", "_k", "_keys", "_mid", "_prefix")
    script = _ENQUEUE

    @staticmethod
    def valid_id(job_id: object) -> bool:
        """True for an id this builds a call for (``enqueue`` refuses every other)."""
        return type(job_id) is str and _ID_SHAPE(job_id) is not None

    def __init__(self, k: QueueKeys) -> None:
        self._k = k
        self._prefix = k.job_prefix
        self._keys = (k.pending, k.wake, k.meta, k.parked, k.active, k.rate)
        prefix = k.job_prefix.encode()
        nargs = 3 + 1 + len(self._keys) + 3  # EVALSHA sha numkeys, job, the other keys, id payload token
        self._head = b"*%d\r\n$7\r\nEVALSHA\r\n%b%b$%d\r\n%b" % (
            nargs, _bulk(_ENQUEUE.sha), _bulk(str(1 + len(self._keys))),
            len(prefix) + ID_LENGTH, prefix)
        self._mid = b"\r\n" + b"".join(map(_bulk, self._keys)) + b"$%d\r\n" % ID_LENGTH

    def __call__(self, job_id: str, payload: bytes) -> Call:
        if type(job_id) is not str or _ID_SHAPE(job_id) is None:
            self._k.job(job_id)  # raises InvalidJobId, as enqueue() would
        return self.build(job_id, payload)

    def build(self, job_id: str, payload: bytes) -> Call:
        """The call for an id :meth:`valid_id` accepts and a checked bytes payload."""
        key = self._prefix + job_id
        raw = job_id.encode()
        token = call_token()
        wire = b"".join((self._head, raw, self._mid, raw, b"\r\n$%d\r\n" % len(payload), payload,
                         b"\r\n$%d\r\n%b\r\n" % (len(token), token.encode())))
        # Tuples, not lists: the collector stops tracking a tuple of strings.
        return Call(_ENQUEUE, (key, *self._keys), (job_id, payload, token), wire)


class _BatchKeys(Sequence[str]):
    """A batch call's KEYS, its job keys made only when read: the bulk wire sends the
    call's ``wire`` and a cluster routes it by ``KEYS[1]``, so they are rarely needed."""

    __slots__ = ("_fixed", "_ids", "_prefix")

    def __init__(self, fixed: tuple[str, ...], prefix: str, ids: Sequence[str]) -> None:
        self._fixed, self._prefix, self._ids = fixed, prefix, ids

    def __len__(self) -> int:
        return len(self._fixed) + len(self._ids)

    def __getitem__(self, index: Any) -> Any:
        if type(index) is int and 0 <= index < len(self._fixed):
            return self._fixed[index]
        return list(self)[index]

    def __iter__(self) -> Iterator[str]:
        yield from self._fixed
        prefix = self._prefix
        for i in self._ids:
            yield prefix + i


class BatchEnqueuer:
    """:func:`~echomq.protocol.calls.enqueue_batch` calls of one queue, each with its request in
    ``wire``, built with a few joins over the whole batch instead of a step per job:
    every id has the same length, so the job keys' RESP headers are one separator
    (payloads of one length likewise). ``ids`` must pass
    :meth:`valid_ids`, ``payloads`` be checked bytes."""

    __slots__ = ("_fixed", "_fixed_wire", "_key_head", "_key_sep", "_prefix")
    script = _ENQUEUE_BATCH
    _SHA = _bulk(_ENQUEUE_BATCH.sha)

    @staticmethod
    def valid_ids(ids: list[str]) -> bool:
        """True if every id is a str of the JOB kind and a valid shape (one regex pass)."""
        try:
            joined = "\n".join(ids)
        except TypeError:
            return False
        return not ids or _JOB_IDS.fullmatch(joined + "\n") is not None

    def __init__(self, k: QueueKeys) -> None:
        self._fixed = (k.pending, k.wake, k.meta, k.parked, k.active, k.rate)
        self._fixed_wire = b"".join(map(_bulk, self._fixed))
        self._prefix = k.job_prefix
        size = len(k.job_prefix.encode()) + ID_LENGTH
        self._key_head = f"${size}\r\n{k.job_prefix}"
        self._key_sep = f"\r\n${size}\r\n{k.job_prefix}"

    def build(self, ids: Sequence[str], payloads: Sequence[bytes]) -> Call:
        """The call for ``ids`` (at least one, as :meth:`valid_ids` accepts) and their
        payloads. Its request is encoded when the wire sends it (``Call.encode``), so a
        batch's later calls are encoded while the server runs its earlier flushes."""
        payloads, token = tuple(payloads), call_token()
        return Call(_ENQUEUE_BATCH, _BatchKeys(self._fixed, self._prefix, ids), (token, *payloads),
                    encode=functools.partial(self._request, ids, payloads, token))

    def _request(self, ids: Sequence[str], payloads: Sequence[bytes], token: str) -> bytes:
        n = len(ids)
        keys = f"{self._key_head}{self._key_sep.join(ids)}\r\n"
        sizes = set(map(len, payloads))
        if len(sizes) == 1:
            head = b"$%d\r\n" % sizes.pop()
            data = b"".join((head, (b"\r\n" + head).join(payloads), b"\r\n"))
        else:
            data = b"".join([b"$%d\r\n%b\r\n" % (len(p), p) for p in payloads])
        return b"".join((b"*%d\r\n$7\r\nEVALSHA\r\n%b%b" % (10 + 2 * n, self._SHA, _bulk(str(6 + n))),
                         self._fixed_wire, keys.encode(), _bulk(token), data))
