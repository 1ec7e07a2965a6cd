"""One job of the outbox as a value: its queue, payload and admission options. Pure.

:class:`OutboxJob` is the seam between what an application admits and how the relay admits
it. Today callers give raw ``(queue, payload, options)``; a typed task
(:mod:`echomq.tasks`, being built) needs only to turn a call into an ``OutboxJob`` (its
queue, its encoded envelope, its options) to be admitted transactionally the same way.

Every field is checked when the job is made, with the queue's own checks
(:mod:`echomq.protocol`), so a bad job is refused before the caller's INSERT, never by the
relay after the commit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from echomq import protocol as p
from echomq.core.errors import InvalidArgument, InvalidJobId
from echomq.core.ids import derive_id, valid
from echomq.core.model import QueueOptions
from echomq.protocol.gate import check_priority
from echomq.protocol.keyspace import check_queue

__all__ = ["MAX_PAYLOAD", "OutboxJob", "job_id_of"]

MAX_PAYLOAD = QueueOptions().max_payload
"""The payload bound checked at insert: a queue's default ``max_payload`` (512 KiB). A queue
the relay opens with a smaller bound refuses a larger row for good (its ``error`` column)."""

_OPTIONS = ("lane", "delay_ms", "serial", "max_attempts", "priority", "timeout_ms")


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxJob:
    """A job to admit when the transaction that wrote it commits (the options are
    :meth:`echomq.AsyncQueue.admit`'s, with its ranges).

    ``job_id``: the job's own id (a ``JOB`` branded id the application already uses, e.g.
    the key of the row it wrote in the same transaction); None: derived from the outbox
    row (:func:`job_id_of`). Either way every relay admits the row under the same id, so a
    relay that dies after admitting admits nothing twice."""

    queue: str
    payload: bytes
    lane: str | None = None
    delay_ms: int = 0
    serial: bool = False
    max_attempts: int | None = None
    priority: int = 0
    timeout_ms: int | None = None
    job_id: str | None = None

    def __post_init__(self) -> None:
        check_queue(self.queue)
        if self.job_id is not None and not (valid(self.job_id) and self.job_id.startswith("JOB")):
            raise InvalidJobId(f"an outbox job id is a JOB branded id, not {self.job_id!r}")
        object.__setattr__(self, "payload", p.check_payload(self.payload, MAX_PAYLOAD))
        p.check_lane(self.lane)
        p.check_int("delay_ms", self.delay_ms, 0, p.MAX_DELAY_MS)
        if not isinstance(self.serial, bool):
            raise InvalidArgument(f"serial must be a bool, not {type(self.serial).__name__}")
        if self.max_attempts is not None:
            p.check_int("max_attempts", self.max_attempts, 1, p.MAX_ATTEMPTS)
        check_priority(self.priority)
        if self.timeout_ms is not None:
            p.check_int("timeout_ms", self.timeout_ms, 1, p.MAX_DELAY_MS)

    @property
    def plain(self) -> bool:
        """No option: the relay admits it on the batch path (``enqueue_batch``)."""
        return self.options() == {}

    def options(self) -> dict[str, Any]:
        """The options that differ from the defaults (the row's ``options`` column)."""
        out: dict[str, Any] = {}
        for name, default in zip(_OPTIONS, (None, 0, False, None, 0, None), strict=True):
            value = getattr(self, name)
            if value != default:
                out[name] = value
        return out

    def options_json(self) -> str:
        # Compact, keys sorted, UTF-8 (the column is jsonb: only the value counts); msgspec
        # takes ~0.6 µs where json.dumps(sort_keys=True) took ~6, once per row written.
        return _OPTIONS_JSON.encode(self.options()).decode()

    @classmethod
    def from_row(cls, queue: str, payload: bytes, options: Mapping[str, Any] | None,
                 job_id: str | None = None) -> OutboxJob:
        """The job a row holds (InvalidArgument for a row no checked insert wrote)."""
        opts = dict(options or {})
        unknown = set(opts) - set(_OPTIONS)
        if unknown:
            raise InvalidArgument(f"unknown outbox option(s) {sorted(unknown)}")
        return cls(queue=queue, payload=bytes(payload), job_id=job_id, **opts)


def job_id_of(namespace: str, row_id: int, created_ms: int) -> str:
    """The job id of outbox row ``row_id``: derived from the row (its table's namespace and
    its number), so every relay that ever admits the row admits the same id and the queue
    refuses the second as a duplicate. Its time part is the row's insert time (ms), so the
    ids sort with ``generate()`` ids by time and a search by admission time finds them."""
    return derive_id("JOB", str(row_id), namespace=namespace, at_ms=max(0, created_ms))


_OPTIONS_JSON = msgspec.json.Encoder(order="sorted")
