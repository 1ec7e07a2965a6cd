# Generated from echomq/_async/upkeep.py by scripts/unasync_gen.py. Do not edit.
"""Upkeep and inspection of a queue: promote, reap, retention, dead jobs, counts, pages.

These act on jobs the client cannot name in advance, so each *peeks* a bounded page
of candidate ids (the ``peek`` script: a ``ZRANGE`` behind the version fence) and hands
their job keys to its script, which re-checks every candidate
(docs/decisions/0002-peek-then-act.md). :class:`Queue` inherits them; they are
apart only to keep each module small.

``limit`` means the same in every method: a page of at most ``limit`` jobs, 0..10,000;
0 is an empty page (nothing done), never "all". Bulk dead-job operations return a
:class:`~echomq.protocol.Bulk`: the number acted on, with ``remaining`` left in the set.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from echomq import protocol as p
from echomq._sync.cluster import ClusterConnector
from echomq._sync.connector import Connector
from echomq.errors import InvalidArgument
from echomq.model import JobView, QueueOptions, Stats
from echomq.protocol import STATES, Bulk

__all__ = ["STATES", "Upkeep"]


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class Upkeep:
    """The maintenance and inspection half of :class:`echomq.Queue`."""

    connector: Connector | ClusterConnector
    name: str
    options: QueueOptions
    keys: dict[str, str]
    k: p.QueueKeys

    def _peek(self, state: str, count: int, start: int = 0) -> list[bytes]:
        return p.decode_ids(self.connector.eval(
            *p.peek(self.k, state, start=start, count=count)))

    # ------------------------------------------------------------- maintenance
    def promote(self) -> int:
        """Move due delayed jobs to pending; at most ``options.reap_batch`` per call."""
        ids = self._peek("delayed", self.options.reap_batch)
        if not ids:
            return 0
        return p.decode_count(self.connector.eval(*p.promote(self.k, ids)))

    def reap(self) -> tuple[int, int]:
        """Re-expose jobs whose lease expired; returns (requeued, dead). Bounded per call."""
        ids = self._peek("active", self.options.reap_batch)
        if not ids:
            return (0, 0)
        call = p.reap(self.k, ids, max_attempts=self.options.max_attempts)
        return p.decode_reap(self.connector.eval(*call))

    def _purge(self, state: str, min_age_ms: int, limit: int) -> Bulk:
        ids = self._peek(state, limit) if limit else []
        call = p.purge(self.k, state, ids, min_age_ms=min_age_ms)
        return p.decode_bulk(self.connector.eval(*call))

    def trim(self) -> int:
        """Retention: delete done and dead rows older than their keep window (bounded)."""
        n = self.options.reap_batch
        return self._purge("done", self.options.keep_done_ms, n) + self._purge(
            "dead", self.options.keep_dead_ms, n
        )

    def purge_dead(self, *, limit: int = 1000) -> Bulk:
        """Delete up to ``limit`` (0..10,000) dead jobs now, oldest first; the result is
        how many were deleted, with ``remaining`` dead jobs left."""
        p.check_int("limit", limit, 0, p.MAX_PAGE)
        return self._purge("dead", 0, limit)

    def requeue_dead(self, *, limit: int = 1000) -> Bulk:
        """Put up to ``limit`` (0..10,000) dead jobs back on pending with a fresh failure
        budget, oldest first; the result is how many, with ``remaining`` dead jobs left."""
        p.check_int("limit", limit, 0, p.MAX_PAGE)
        ids = self._peek("dead", limit) if limit else []
        return p.decode_bulk(self.connector.eval(*p.requeue(self.k, ids)))

    # ------------------------------------------------- named jobs (operators)
    def _named(self, ids: Sequence[str]) -> list[str]:
        if isinstance(ids, str | bytes) or not isinstance(ids, Sequence):
            raise InvalidArgument("give a sequence of job ids")
        p.check_int("the number of job ids", len(ids), 1, min(self.options.batch, p.MAX_PAGE))
        for i in ids:
            self.k.job(i)  # InvalidJobId before any I/O
        return list(ids)

    def requeue(self, ids: Sequence[str]) -> int:
        """Put the named dead jobs back on pending with a fresh failure budget (the
        ``requeue`` script); ids that are not dead are skipped. Returns how many moved
        (a :class:`Bulk`, with ``remaining`` dead jobs left)."""
        return p.decode_bulk(self.connector.eval(*p.requeue(self.k, self._named(ids))))

    def purge(self, state: str, ids: Sequence[str]) -> int:
        """Delete the named jobs of a finished state (``done`` or ``dead``) now (the
        ``purge`` script); ids not in that state are skipped. Returns how many went."""
        if state not in ("done", "dead"):
            raise InvalidArgument("state must be done or dead")
        call = p.purge(self.k, state, self._named(ids), min_age_ms=0)
        return p.decode_bulk(self.connector.eval(*call))

    def cancel(self, ids: Sequence[str]) -> int:
        """Delete the named jobs that are still waiting (pending or delayed; the ``cancel``
        script); active and finished jobs are skipped. Returns how many went."""
        return p.decode_count(self.connector.eval(*p.cancel(self.k, self._named(ids))))

    # -------------------------------------------------------------- inspection
    def pending_size(self) -> int:
        return p.decode_count(self.connector.eval(*p.pending_size(self.k)))

    def stats(self) -> Stats:
        return p.decode_stats(self.connector.eval(*p.stats(self.k)))

    def browse(self, state: str, *, offset: int = 0, limit: int = 50) -> list[JobView]:
        """A page of at most ``limit`` (0..10,000) jobs in ``state`` from rank ``offset``
        (set order), with their rows, read consistently. ``limit`` 0: an empty page."""
        self.k.state(state)
        p.check_int("offset", offset, 0, p.MAX_OFFSET)
        p.check_int("limit", limit, 0, p.MAX_PAGE)
        ids = self._peek(state, limit, offset)
        if not ids:
            return []
        return p.decode_views(self.connector.eval(*p.browse(self.k, state, ids)))
