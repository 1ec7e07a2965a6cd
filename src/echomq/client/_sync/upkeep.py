# Generated from echomq/client/_async/upkeep.py by scripts/unasync_gen.py. Do not edit.
"""Upkeep and inspection of a queue: promote, reap, retention, dead jobs, counts, pages.

These act on jobs the client cannot name in advance, so each *peeks* a bounded page
of candidate ids (the ``peek`` script: a ``ZRANGE`` behind the version fence) and hands
their job keys to its script, which re-checks every candidate
(docs/decisions/0002-peek-then-act.md). Each :class:`Queue` owns one
:class:`Upkeep` (``queue.upkeep``): the queue admits and leases, the upkeep keeps
the sets tidy and answers operators; the queue's methods of the same names hand over to
it (composition, not inheritance: the upkeep is given the queue's connector, keys and
options, and knows nothing of the queue itself, so the arrow runs one way).

``limit`` means the same in every method: a page of at most ``limit`` jobs, 0..10,000;
0 is an empty page (nothing done), never "all". Bulk dead-job operations return a
:class:`~echomq.protocol.Bulk`: the number acted on, with ``remaining`` left in the set.
"""

from __future__ import annotations

from collections.abc import Sequence

from echomq import protocol as p
from echomq.client._sync.memory import memory_status
from echomq.client._sync.seam import Reply, ScriptConnector
from echomq.core.errors import InvalidArgument
from echomq.core.memory import MemoryStatus
from echomq.core.model import CancelOutcome, JobView, QueueOptions, Stats
from echomq.protocol import STATES, Bulk, Call

__all__ = ["STATES", "Upkeep"]


class Upkeep:
    """The maintenance and inspection verbs of one queue (``queue.upkeep``)."""

    def __init__(self, connector: ScriptConnector, keys: p.QueueKeys,
                 options: QueueOptions) -> None:
        self.connector = connector
        self.k = keys
        self.options = options

    def _run(self, call: Call) -> Reply:
        return self.connector.run(call)

    def peek(self, state: str, count: int, *, start: int = 0) -> list[bytes]:
        """The ids of up to ``count`` jobs in ``state`` from rank ``start`` (set order): the
        candidates a peek-then-act script re-checks (docs/decisions/0002)."""
        p.check_int("count", count, 0, p.MAX_WINDOW)
        p.check_int("start", start, 0, p.MAX_OFFSET)
        return p.decode_ids(self._run(p.peek(self.k, state, start=start, count=count)))

    def _peek(self, state: str, count: int, start: int = 0) -> list[bytes]:
        return self.peek(state, count, start=start)

    def memory_status(self) -> MemoryStatus:
        """The server's memory against its limit, for this queue's slot (echomq.core.memory)."""
        return memory_status(self.connector, self.k.name)

    def take_token(self, owner: str, ttl_ms: int) -> bool:
        """Take the queue's upkeep token (``SET maint owner NX PX ttl_ms``) for ``ttl_ms``:
        True for the one caller that got it. Consumers race for it every beat, so one of
        them runs promote and reap. At maxmemory the server refuses the SET (ServerFull)."""
        return bool(self.connector.command(
            "SET", self.k.maint, owner, "NX", "PX", ttl_ms))

    # ------------------------------------------------------------- maintenance
    def promote(self) -> int:
        """Move due delayed jobs to pending; at most ``options.reap_batch`` per call."""
        ids = self._peek("delayed", self.options.reap_batch)
        if not ids:
            return 0
        return p.decode_count(self._run(p.promote(self.k, ids)))

    def reap(self) -> tuple[int, int]:
        """Re-expose jobs whose lease expired; returns (requeued, dead), a
        :class:`~echomq.protocol.Reaped` whose ``cancelled`` counts the expired jobs that had
        been asked to stop (they end cancelled). Bounded per call."""
        ids = self._peek("active", self.options.reap_batch)
        if not ids:
            return p.Reaped(0, 0)
        call = p.reap(self.k, ids, max_attempts=self.options.max_attempts)
        return p.decode_reap(self._run(call))

    def _purge(self, state: str, min_age_ms: int, limit: int) -> Bulk:
        ids = self._peek(state, limit) if limit else []
        call = p.purge(self.k, state, ids, min_age_ms=min_age_ms)
        return p.decode_bulk(self._run(call))

    def expire(self) -> tuple[int, int]:
        """The expiry reaper, one bounded step: of the first ``options.reap_batch`` entries
        of the expiring index (earliest deadline first), each past its deadline whose job
        still waits ends ``expired``; the others whose job started or ended leave the index.
        Returns (expired, dropped); a queue whose jobs never use ``expires_ms`` pays one
        ``peek`` of an empty set (decision 0045)."""
        ids = self._peek("expiring", self.options.reap_batch)
        if not ids:
            return 0, 0
        return p.decode_expire(self._run(p.expire(self.k, ids)))

    def trim(self) -> int:
        """Retention: delete done, dead and expired rows older than their keep window
        (bounded; each state its own window: failures outlive successes)."""
        n, o = self.options.reap_batch, self.options
        return (self._purge("done", o.keep_done_ms, n)
                + self._purge("dead", o.keep_dead_ms, n)
                + self._purge("expired", o.keep_expired_ms, n))

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
        return p.decode_bulk(self._run(p.requeue(self.k, ids)))

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
        return p.decode_bulk(self._run(p.requeue(self.k, self._named(ids))))

    def purge(self, state: str, ids: Sequence[str]) -> int:
        """Delete the named jobs of a finished state (``done``, ``dead`` or ``expired``) now
        (the ``purge`` script); ids not in that state are skipped. Returns how many went."""
        if state not in ("done", "dead", "expired"):
            raise InvalidArgument("state must be done, dead or expired")
        call = p.purge(self.k, state, self._named(ids), min_age_ms=0)
        return p.decode_bulk(self._run(call))

    def cancel(self, ids: Sequence[str]) -> list[CancelOutcome]:
        """Cancel the named jobs, one outcome per id in order (the ``cancel`` script, one
        step): a waiting job (pending or delayed) ends ``cancelled`` now (CANCELLED); a
        running one is asked to stop (ASKED): its attempt learns it at its next heartbeat
        or progress report and, however that attempt ends, the job ends ``cancelled``,
        never done; a finished or unknown job is LEFT as it is. A cancelled row is kept
        in the done set for ``keep_done_ms`` (docs/decisions/0023)."""
        return p.decode_cancels(self._run(p.cancel(self.k, self._named(ids))))

    # -------------------------------------------------------------- inspection
    def pending_size(self) -> int:
        return p.decode_count(self._run(p.pending_size(self.k)))

    def stats(self) -> Stats:
        return p.decode_stats(self._run(p.stats(self.k)))

    def browse(self, state: str, *, offset: int = 0, limit: int = 50) -> list[JobView]:
        """A page of at most ``limit`` (0..10,000) jobs in ``state`` from rank ``offset``
        (set order), with their rows, read consistently. ``limit`` 0: an empty page."""
        self.k.state(state)
        p.check_int("offset", offset, 0, p.MAX_OFFSET)
        p.check_int("limit", limit, 0, p.MAX_PAGE)
        ids = self._peek(state, limit, offset)
        if not ids:
            return []
        return p.decode_views(self._run(p.browse(self.k, state, ids)))
