"""The reconciler: every round settles and every job of the game is seen to, without a person
(issue 12, item 2; issue 25, item 3).

PostgreSQL is the truth of the game; the queues only carry work towards it. A
supervised child of the app (:class:`Reconciler`) compares the two every
``interval_s`` and repairs what a fault left behind. Each pass, in order:

1. **Is the cause gone?** One ``SELECT 1`` on the pool. While PostgreSQL does not
   answer, the pass does nothing (requeueing work that needs the database would
   only kill it again).
2. **Dead jobs are requeued** on every game queue: ``cm``, ``cm-settle``, ``cm.notify``
   and ``cm.commands`` (a ``/start`` that died in an outage is answered after it). The
   dead set is read in pages from a cursor that moves on past the jobs left dead, so
   what the reconciler gave up on never hides newer deaths, and a pass reads at most
   ``pages`` pages per queue (the next pass goes on from there; past the end it starts
   over). Each job is requeued at most ``max_requeues`` times; the count and the
   give-up live in PostgreSQL (:mod:`codemojex.wallet.repairs`), so a restart neither
   forgets nor starts over. A give-up is logged once at ERROR with the queue, the job
   id and its last error, and counted (:func:`gave_up_counts`, :meth:`Reconciler.metrics`).
3. **Guesses whose job was lost after admission are re-admitted.** The charge
   writes the guess's job into the game's outbox in its own transaction, and
   echomq's relay admits it (decision 0034): the gap between a commit and its
   admission is the relay's, never the reconciler's. What is left here is a job lost
   *after* the relay admitted it and deleted its row (a failover, a Valkey restart
   without its AOF): an unscored guess older than ``min_age_s``, with no outbox row
   and no job row, is admitted again under its own id onto its player's serial lane.
   Read in pages by id from a cursor.
4. **Every score is told.** Each guess scored at least ``min_age_s`` ago, and since
   the reconciler's first pass, whose score is not stamped told yet (a failover lost
   the last acknowledged admission of its note, say) gets a score note of its player and
   round admitted, due at once (:mod:`codemojex.service.scorenotes`: a waiting note is
   made due instead; a note that then finds the score told sends nothing). Each scored
   guess is checked once (a watermark).
5. **Every round past its closing time is driven to settled.** A round still
   open or closed ``grace_s`` after ``closes_at`` is closed and settled here with
   :func:`~codemojex.service.rounds.close_and_settle` (idempotent: the same
   call the close job makes, so the two may race harmlessly). A round whose
   guesses are not all scored yet is left to a later pass; the rounds are read in
   pages from a (closes_at, id) cursor, so such a round never hides the ones after it.
6. **The round opener never stops.** Every running series gets the open job of its
   next round admitted again under its derived id (:func:`~codemojex.service.series.kick`:
   a DUPLICATE while the queue holds it), so a lost open job is only a delay.

Everything a pass does is idempotent (requeue re-checks each job, admission
refuses a duplicate id, settlement pays each winner once under a unique ledger
ref, the opener opens a series' next round once), so any number of reconcilers may
run, in any number of processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from codemojex.domain.errors import DatabaseError
from codemojex.service.codec import GuessJob, encode
from codemojex.service.context import Services
from codemojex.service.rounds import close_and_settle
from codemojex.service.scorenotes import ScoreNotes
from codemojex.service.series import kick
from codemojex.wallet import NotReady, reads, repairs
from codemojex.wallet.batch import scored_untold_after
from codemojex.wallet.series import running_series
from echomq import AsyncQueue, AsyncShardedQueue, EchoMQError, JobView, Verdict

__all__ = ["Cursor", "GaveUp", "Pass", "Reconciler", "gave_up_counts", "queues", "reconcile_once",
           "requeue_dead_ids"]

log = logging.getLogger("codemojex.reconcile")



@dataclass(slots=True)
class Pass:
    """What one pass did."""

    database_up: bool = False
    requeued: int = 0  # dead jobs put back on pending
    readmitted: int = 0  # charged guesses whose job was gone, admitted again
    settled: list[str] = field(default_factory=list)  # rounds this pass settled
    waiting: int = 0  # overdue rounds still waiting for scores
    renotified: int = 0  # score notes admitted again for scores still untold (a new note each)
    notes_checked: tuple[datetime, str] | None = None  # (scored_at, id) of the last guess checked
    gave_up: list[GaveUp] = field(default_factory=list)  # dead jobs given up on by this pass
    kicked: int = 0  # open jobs of running series that were missing, admitted again


@dataclass(frozen=True, slots=True)
class GaveUp:
    """A dead job the reconciler stopped requeueing: its queue, its id, its last error."""

    queue: str
    job_id: str
    cause: str


@dataclass(slots=True)
class Cursor:
    """Where each paged scan of the reconciler goes on from (a pass reads a bounded number of
    pages; the next pass continues; past the end a scan starts over)."""

    dead: dict[str, int] = field(default_factory=dict)  # offset into each queue's dead set
    unscored: str = ""  # the last guess id checked
    overdue: tuple[datetime, str] | None = None  # (closes_at, id) of the last round seen
    series: str = ""  # the last series id kicked


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


def _cause(view: JobView) -> str:
    return view.row.get("error", b"").decode(errors="replace")[:500] or "no error recorded"


async def _requeue(services: Services, queue: AsyncQueue | AsyncShardedQueue, cursor: Cursor,
                   max_requeues: int, page: int, pages: int, gave_up: list[GaveUp]) -> int:
    """Requeue the dead jobs of ``queue`` still under their bound, ``pages`` pages from the cursor."""
    offset, moved = cursor.dead.get(queue.name, 0), 0
    for _ in range(pages):
        views = await queue.browse("dead", offset=offset, limit=page)
        seen = await repairs.requeue_counts(services.pool, queue.name, [v.id for v in views]) if views else {}
        due, hopeless, kept = [], [], 0
        for v in views:
            count, done = seen.get(v.id, (0, False))
            if done or count >= max_requeues:
                kept += 1  # stays dead: the next page starts after it
                if not done:
                    hopeless.append((v.id, _cause(v)))
            else:
                due.append(v.id)
        if hopeless:
            for job_id in await repairs.give_up(services.pool, queue.name, hopeless):
                cause = dict(hopeless)[job_id]
                gave_up.append(GaveUp(queue.name, job_id, cause))
                log.error("reconcile: gave up on %s job %s after %d requeues: %s", queue.name, job_id,
                          max_requeues, cause)
        if due:
            await repairs.count_requeues(services.pool, queue.name, due)
            moved += await requeue_dead_ids(queue, due)
        offset += kept
        if len(views) < page:
            offset = 0  # the end of the dead set: the next scan starts over
            break
    cursor.dead[queue.name] = offset
    if moved:
        log.warning("reconcile: requeued %d dead jobs on %s", moved, queue.name)
    return moved


async def _readmit(services: Services, cursor: Cursor, min_age_s: float, limit: int) -> int:
    rows = await reads.admitted_unscored(services.pool, min_age_s, limit, after=cursor.unscored)
    cursor.unscored = rows[-1][0] if len(rows) == limit else ""  # a short page: start over next time
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
    rows = await scored_untold_after(services.pool, after, min_age_s, limit)
    if not rows:
        return 0, after
    untold = {(p, r): g for g, r, p, _, told in rows if not told}  # one note per (player, round)
    admitted = 0
    if untold:
        verdicts = await ScoreNotes(services.notifications).admit([(p, r, g) for (p, r), g in untold.items()])
        failed = [v for v in verdicts if isinstance(v, Exception)]
        if failed:
            raise failed[0]  # the watermark stays: the next pass checks them again
        admitted = sum(v is Verdict.ENQUEUED for v in verdicts)
        log.warning("reconcile: %d players' scores untold %.0fs after scoring; %d score notes admitted"
                    " again, %d waiting ones made due", len(untold), min_age_s, admitted,
                    sum(v is Verdict.REPLACED for v in verdicts))
    return admitted, (rows[-1][3], rows[-1][0])


async def _settle_overdue(services: Services, cursor: Cursor, grace_s: float, limit: int,
                          done: Pass) -> None:
    rows = await reads.overdue_rounds(services.pool, grace_s, limit, after=cursor.overdue)
    cursor.overdue = (rows[-1][1], rows[-1][0]) if len(rows) == limit else None
    for rid, _ in rows:
        result = await close_and_settle(services, rid)
        if isinstance(result, NotReady):
            done.waiting += 1
        elif result is not None:
            done.settled.append(str(rid))
            log.warning("reconcile: settled overdue round %s", rid)


async def _kick_series(services: Services, cursor: Cursor, limit: int) -> int:
    rows = await running_series(services.pool, after=cursor.series, limit=limit)
    cursor.series = rows[-1].id if len(rows) == limit else ""
    kicked = 0
    for row in rows:
        if await kick(services, row):
            kicked += 1
            log.warning("reconcile: series %s had no open job for round %d; admitted it again", row.id,
                        row.next_index)
    return kicked


def queues(services: Services) -> tuple[AsyncQueue | AsyncShardedQueue, ...]:
    """Every queue of the game the reconciler repairs."""
    return (services.scores, services.settlements, services.notifications, services.commands)


async def reconcile_once(services: Services, *, cursor: Cursor | None = None,
                         notes_after: tuple[datetime, str] | None = None,
                         min_age_s: float = 5.0, grace_s: float = 5.0, max_requeues: int = 3,
                         limit: int = 200, pages: int = 5, renotify: bool = True) -> Pass:
    """One pass (see the module docstring). ``cursor`` carries the paged scans between passes,
    ``notes_after`` the last guess whose notification was checked (:attr:`Pass.notes_checked`);
    ``limit`` is a page's size, ``pages`` how many pages of dead jobs a pass reads per queue."""
    done = Pass()
    if not await _database_up(services):
        return done
    done.database_up = True
    cursor = Cursor() if cursor is None else cursor
    for queue in queues(services):
        done.requeued += await _requeue(services, queue, cursor, max_requeues, limit, pages, done.gave_up)
    done.readmitted = await _readmit(services, cursor, min_age_s, limit)
    if renotify:  # off where scores are told in batches (the bot: codemojex.bot.announce)
        done.renotified, done.notes_checked = await _renotify(services, notes_after, min_age_s, limit)
    await _settle_overdue(services, cursor, grace_s, limit, done)
    done.kicked = await _kick_series(services, cursor, limit)
    return done


async def gave_up_counts(services: Services) -> dict[str, int]:
    """How many dead jobs the reconciler gave up on, by queue, across processes and restarts
    (from PostgreSQL; for a metric such as ``codemojex_reconcile_gave_up_total{queue}``)."""
    return await repairs.given_up(services.pool)


class Reconciler:
    """The reconciler as a supervised child: a pass every ``interval_s`` until :meth:`stop`."""

    def __init__(self, services: Services, *, interval_s: float = 1.0, min_age_s: float = 5.0,
                 grace_s: float = 5.0, max_requeues: int = 3, renotify: bool = True) -> None:
        self.services = services
        self.renotify = renotify
        self.interval_s = interval_s
        self.min_age_s = min_age_s
        self.grace_s = grace_s
        self.max_requeues = max_requeues
        self.cursor = Cursor()
        self.notes_checked: tuple[datetime, str] | None = None
        self.renotified = 0
        self.passes = 0
        self.requeued = 0
        self.readmitted = 0
        self.kicked = 0
        self.settled: list[str] = []
        self.gave_up: Counter[str] = Counter()  # by queue, by this process
        self.last_pass_at = 0.0
        self._stopping = asyncio.Event()

    def metrics(self) -> dict[str, int]:
        """What this reconciler did since it started, by action (for a Prometheus counter
        ``codemojex_reconcile_actions_total{action}``); give-ups by queue, all processes and
        restarts included, come from :func:`gave_up_counts`."""
        return {"passes": self.passes, "requeued": self.requeued, "readmitted": self.readmitted,
                "renotified": self.renotified, "settled": len(self.settled), "kicked": self.kicked,
                "gave_up": sum(self.gave_up.values())}

    async def run(self) -> None:
        self._stopping.clear()
        while not self._stopping.is_set():
            try:
                done = await reconcile_once(self.services, cursor=self.cursor,
                                            notes_after=self.notes_checked, min_age_s=self.min_age_s,
                                            grace_s=self.grace_s, max_requeues=self.max_requeues,
                                            renotify=self.renotify)
                if done.database_up:
                    self.notes_checked = done.notes_checked
                self.renotified += done.renotified
                self.passes += 1
                self.requeued += done.requeued
                self.readmitted += done.readmitted
                self.kicked += done.kicked
                self.settled += done.settled
                self.gave_up.update(g.queue for g in done.gave_up)
                self.last_pass_at = time.monotonic()
            except (OSError, EchoMQError, DatabaseError) as exc:
                log.warning("reconcile pass failed (%r); next pass in %.1fs", exc, self.interval_s)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.interval_s)

    def stop(self) -> None:
        self._stopping.set()
