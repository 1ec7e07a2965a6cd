# Generated from echomq/_async/upkeep.py by scripts/unasync_gen.py. Do not edit.
"""Upkeep and inspection of a queue: promote, reap, retention, dead jobs, counts, pages.

These act on jobs the client cannot name in advance, so each *peeks* a bounded page
of candidate ids (``ZRANGE``) and hands their job keys to its script, which re-checks
every candidate (docs/decisions/0002-peek-then-act.md). :class:`Queue` inherits
them; they are apart only to keep each module small.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from echomq import ids as branded
from echomq._sync.cluster import ClusterConnector
from echomq._sync.connector import Connector
from echomq.errors import InvalidJobId
from echomq.model import JobView, QueueOptions, Stats
from echomq.scripts import load

__all__ = ["STATES", "Upkeep"]

STATES = ("pending", "active", "delayed", "done", "dead")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class Upkeep:
    """The maintenance and inspection half of :class:`echomq.Queue`."""

    connector: Connector | ClusterConnector
    name: str
    options: QueueOptions
    keys: dict[str, str]
    _job_prefix: str

    # ------------------------------------------------------------- maintenance
    def promote(self) -> int:
        """Move due delayed jobs to pending; at most ``options.reap_batch`` per call."""
        ids = self.connector.command(
            "ZRANGE", self.keys["delayed"], 0, self.options.reap_batch - 1
        )
        if not ids:
            return 0
        k = self.keys
        keys = [k["delayed"], k["pending"], k["lanes"], k["meta"], k["wake"], k["inflight"]]
        keys += [self._job_prefix + _text(i) for i in ids]
        return int(self.connector.eval(load("promote"), keys, ids))

    def reap(self) -> tuple[int, int]:
        """Re-expose jobs whose lease expired; returns (requeued, dead). Bounded per call."""
        ids = self.connector.command(
            "ZRANGE", self.keys["active"], 0, self.options.reap_batch - 1
        )
        if not ids:
            return (0, 0)
        k = self.keys
        keys = [k["active"], k["pending"], k["dead"], k["lanes"], k["meta"], k["inflight"], k["wake"]]
        keys += [self._job_prefix + _text(i) for i in ids]
        requeued, dead = self.connector.eval(
            load("reap"), keys, [self.options.max_attempts, *ids]
        )
        return int(requeued), int(dead)

    def _purge(self, state: str, min_age_ms: int, limit: int) -> int:
        ids = self.connector.command("ZRANGE", self.keys[state], 0, limit - 1)
        if not ids:
            return 0
        keys = [self.keys[state], *(self._job_prefix + _text(i) for i in ids)]
        return int(self.connector.eval(load("purge"), keys, [state, min_age_ms, *ids]))

    def trim(self) -> int:
        """Retention: delete done and dead rows older than their keep window (bounded)."""
        n = self.options.reap_batch
        return self._purge("done", self.options.keep_done_ms, n) + self._purge(
            "dead", self.options.keep_dead_ms, n
        )

    def purge_dead(self, *, limit: int = 1000) -> int:
        """Delete up to ``limit`` dead jobs now."""
        return self._purge("dead", 0, limit)

    def requeue_dead(self, *, limit: int = 1000) -> int:
        """Put up to ``limit`` dead jobs back on pending with a fresh failure budget."""
        ids = self.connector.command("ZRANGE", self.keys["dead"], 0, limit - 1)
        if not ids:
            return 0
        k = self.keys
        keys = [k["dead"], k["pending"], k["lanes"], k["meta"], k["wake"]]
        keys += [self._job_prefix + _text(i) for i in ids]
        return int(self.connector.eval(load("requeue"), keys, ids))

    # ------------------------------------------------- named jobs (operators)
    def _named(self, ids: Sequence[str]) -> list[str]:
        if isinstance(ids, str) or not 1 <= len(ids) <= self.options.batch:
            raise ValueError(f"give 1..{self.options.batch} job ids")
        bad = [i for i in ids if not branded.valid(i)]
        if bad:  # before any I/O
            raise InvalidJobId(f"not a branded id: {bad[0]!r}")
        return [self._job_prefix + i for i in ids]

    def requeue(self, ids: Sequence[str]) -> int:
        """Put the named dead jobs back on pending with a fresh failure budget (the
        ``requeue`` script); ids that are not dead are skipped. Returns how many moved."""
        jobs = self._named(ids)
        k = self.keys
        keys = [k["dead"], k["pending"], k["lanes"], k["meta"], k["wake"], *jobs]
        return int(self.connector.eval(load("requeue"), keys, list(ids)))

    def purge(self, state: str, ids: Sequence[str]) -> int:
        """Delete the named jobs of a finished state (``done`` or ``dead``) now (the
        ``purge`` script); ids not in that state are skipped. Returns how many went."""
        if state not in ("done", "dead"):
            raise ValueError("state must be done or dead")
        jobs = self._named(ids)
        return int(self.connector.eval(load("purge"), [self.keys[state], *jobs],
                                             [state, 0, *ids]))

    def cancel(self, ids: Sequence[str]) -> int:
        """Delete the named jobs that are still waiting (pending or delayed; the ``cancel``
        script); active and finished jobs are skipped. Returns how many went."""
        jobs = self._named(ids)
        k = self.keys
        return int(self.connector.eval(
            load("cancel"), [k["pending"], k["delayed"], k["inflight"], *jobs], list(ids)))

    # -------------------------------------------------------------- inspection
    def pending_size(self) -> int:
        return int(self.connector.eval(load("pending_size"), [self.keys["pending"]], []))

    def stats(self) -> Stats:
        counts = self.connector.eval(load("stats"), [self.keys[s] for s in STATES], [])
        return Stats(*(int(c) for c in counts))

    def browse(self, state: str, *, offset: int = 0, limit: int = 50) -> list[JobView]:
        """A page of jobs in ``state`` (set order), with their rows, read consistently."""
        if state not in STATES:
            raise ValueError(f"state must be one of {STATES}")
        ids = self.connector.command("ZRANGE", self.keys[state], offset, offset + limit - 1)
        if not ids:
            return []
        keys = [self.keys[state], *(self._job_prefix + _text(i) for i in ids)]
        flat = self.connector.eval(load("browse"), keys, ids)
        views = []
        for i in range(0, len(flat), 3):
            fields = flat[i + 2]
            row = {_text(fields[j]): fields[j + 1] for j in range(0, len(fields), 2)}
            views.append(JobView(id=_text(flat[i]), score=float(flat[i + 1]), row=row))
        return views
