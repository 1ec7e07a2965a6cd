"""The reconciler: every round settles without a person (issue 12, item 2).

PostgreSQL is the truth of the game; the queues only carry work towards it. A
supervised child of the app (:class:`Reconciler`) compares the two every
``interval_s`` and repairs what a fault left behind. Each pass, in order:

1. **Is the cause gone?** One ``SELECT 1`` on the pool. While PostgreSQL does not
   answer, the pass does nothing (requeueing work that needs the database would
   only kill it again).
2. **Dead game jobs are requeued** on ``cm``, ``cm-settle`` and ``cm.notify``
   (a scoring job dies after five failures: a PostgreSQL outage of some fifteen
   seconds is enough). Each job is requeued at most ``max_requeues`` times per
   reconciler; one that keeps dying stays dead, logged, and the audit sees its
   round stuck.
3. **Charged guesses with no live job are re-admitted.** An unscored guess
   older than ``min_age_s`` whose job row is gone (a failover lost it, or a
   Valkey restart without its AOF) is admitted again under its own id onto its
   player's serial lane. Guesses not yet admitted at all are the relay's.
4. **Every score is notified.** Each guess scored at least ``min_age_s`` ago, and
   since the reconciler's first pass, whose score notification job does not exist
   (a failover lost the last acknowledged admissions) gets it admitted again,
   under the same derived id. Each scored guess is checked once. (Before the
   first pass the queue covers it: a scoring job is acked only after its
   notification is admitted, so a crash in between re-runs the job.)
5. **Every round past its closing time is driven to settled.** A round still
   open or closed ``grace_s`` after ``closes_at`` is closed and settled here with
   :func:`~codemojex.service.rounds.close_and_settle` (idempotent: the same
   call the close job makes, so the two may race harmlessly). A round whose
   guesses are not all scored yet is left to the next pass.

Everything a pass does is idempotent (requeue re-checks each job, admission
refuses a duplicate id, settlement pays each winner once under a unique ledger
ref), so any number of reconcilers may run, in any number of processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from codemojex.errors import DatabaseError
from codemojex.service.codec import GuessJob, encode, note_id, score_note
from codemojex.service.context import Services
from codemojex.service.rounds import close_and_settle
from codemojex.wallet import NotReady, reads
from echomq import AsyncQueue, AsyncShardedQueue, EchoMQError, Verdict

__all__ = ["Pass", "Reconciler", "reconcile_once", "requeue_dead_ids"]

log = logging.getLogger("codemojex.reconcile")



@dataclass(slots=True)
class Pass:
    """What one pass did."""

    database_up: bool = False
    requeued: int = 0  # dead jobs put back on pending
    readmitted: int = 0  # charged guesses whose job was gone, admitted again
    settled: list[str] = field(default_factory=list)  # rounds this pass settled
    waiting: int = 0  # overdue rounds still waiting for scores
    renotified: int = 0  # score notifications that were lost, admitted again
    notes_checked: tuple[datetime, str] | None = None  # (scored_at, id) of the last guess checked


async def requeue_dead_ids(queue: AsyncQueue | AsyncShardedQueue, job_ids: list[str]) -> int:
    """Requeue exactly ``job_ids`` if they are dead (the script re-checks each one)."""
    moved = 0
    for start in range(0, len(job_ids), queue.options.batch):  # requeue takes a bounded page
        moved += int(await queue.requeue(job_ids[start : start + queue.options.batch]))
    return moved


async def _database_up(services: Services) -> bool:
    try:
        await reads.ping(services.pool)
    except (OSError, DatabaseError) as exc:
        log.info("reconcile: PostgreSQL does not answer (%r); waiting", exc)
        return False
    return True


async def _requeue(queue: AsyncQueue | AsyncShardedQueue, counts: Counter[str], max_requeues: int,
                   limit: int) -> int:
    dead = [v.id for v in await queue.browse("dead", limit=limit)]
    due = [i for i in dead if counts[i] < max_requeues]
    for i in dead:
        if counts[i] == max_requeues:
            counts[i] += 1  # log once
            log.error("reconcile: %s job %s died %d times after requeues; left dead", queue.name, i,
                      max_requeues + 1)
    moved = await requeue_dead_ids(queue, due)
    counts.update(due)
    if moved:
        log.warning("reconcile: requeued %d dead jobs on %s", moved, queue.name)
    return moved


async def _readmit(services: Services, min_age_s: float, limit: int) -> int:
    rows = await reads.admitted_unscored(services.pool, min_age_s, limit)
    if not rows:
        return 0
    jobs = await asyncio.gather(*(services.scores.job(r[0]) for r in rows))
    gone = [r for r, job in zip(rows, jobs, strict=True) if job is None]
    if not gone:
        return 0
    items = [(i, encode(GuessJob(r, p, e)), p) for i, r, p, e in gone]
    verdicts = await services.scores.admit_many(items, serial=True)
    readmitted = sum(v is Verdict.ENQUEUED for v in verdicts)
    for (gid, *_), v in zip(gone, verdicts, strict=True):
        if isinstance(v, Exception):
            log.error("reconcile: could not re-admit guess %s: %r", gid, v)
    log.warning("reconcile: %d charged guesses had no job; re-admitted %d", len(gone), readmitted)
    return readmitted


async def _renotify(services: Services, after: tuple[datetime, str] | None, min_age_s: float,
                    limit: int) -> tuple[int, tuple[datetime, str] | None]:
    if after is None:  # the first pass: start from now
        return 0, (await reads.database_now(services.pool), "")
    rows = await reads.scored_after(services.pool, after, min_age_s, limit)
    if not rows:
        return 0, after
    jobs = await asyncio.gather(*(services.notifications.job(note_id(r[0])) for r in rows))
    lost = [r for r, job in zip(rows, jobs, strict=True) if job is None]
    if lost:
        items = [(note_id(g), score_note(r, p, e, s, g), p) for g, r, p, e, s, _ in lost]
        verdicts = await services.notifications.admit_many(items, serial=True)
        log.warning("reconcile: %d score notifications were lost; admitted again", len(lost))
        failed = [v for v in verdicts if isinstance(v, Exception)]
        if failed:
            raise failed[0]  # the watermark stays: the next pass checks them again
    return len(lost), (rows[-1][5], rows[-1][0])


async def reconcile_once(services: Services, *, counts: Counter[str] | None = None,
                         notes_after: tuple[datetime, str] | None = None,
                         min_age_s: float = 5.0, grace_s: float = 5.0, max_requeues: int = 3,
                         limit: int = 500) -> Pass:
    """One pass (see the module docstring). ``counts`` remembers requeues between passes,
    ``notes_after`` the last guess whose notification was checked (:attr:`Pass.notes_checked`)."""
    done = Pass()
    if not await _database_up(services):
        return done
    done.database_up = True
    counts = Counter() if counts is None else counts
    for queue in (services.scores, services.settlements, services.notifications):
        done.requeued += await _requeue(queue, counts, max_requeues, limit)
    done.readmitted = await _readmit(services, min_age_s, limit)
    done.renotified, done.notes_checked = await _renotify(services, notes_after, min_age_s, limit)
    for rid in await reads.overdue_rounds(services.pool, grace_s, limit):
        result = await close_and_settle(services, rid)
        if isinstance(result, NotReady):
            done.waiting += 1
        elif result is not None:
            done.settled.append(str(rid))
            log.warning("reconcile: settled overdue round %s", rid)
    return done


class Reconciler:
    """The reconciler as a supervised child: a pass every ``interval_s`` until :meth:`stop`."""

    def __init__(self, services: Services, *, interval_s: float = 1.0, min_age_s: float = 5.0,
                 grace_s: float = 5.0, max_requeues: int = 3) -> None:
        self.services = services
        self.interval_s = interval_s
        self.min_age_s = min_age_s
        self.grace_s = grace_s
        self.max_requeues = max_requeues
        self.counts: Counter[str] = Counter()
        self.notes_checked: tuple[datetime, str] | None = None
        self.renotified = 0
        self.passes = 0
        self.requeued = 0
        self.readmitted = 0
        self.settled: list[str] = []
        self.last_pass_at = 0.0
        self._stopping = asyncio.Event()

    async def run(self) -> None:
        self._stopping.clear()
        while not self._stopping.is_set():
            try:
                done = await reconcile_once(self.services, counts=self.counts,
                                            notes_after=self.notes_checked, min_age_s=self.min_age_s,
                                            grace_s=self.grace_s, max_requeues=self.max_requeues)
                if done.database_up:
                    self.notes_checked = done.notes_checked
                self.renotified += done.renotified
                self.passes += 1
                self.requeued += done.requeued
                self.readmitted += done.readmitted
                self.settled += done.settled
                self.last_pass_at = time.monotonic()
            except (OSError, EchoMQError, DatabaseError) as exc:
                log.warning("reconcile pass failed (%r); next pass in %.1fs", exc, self.interval_s)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.interval_s)

    def stop(self) -> None:
        self._stopping.set()
