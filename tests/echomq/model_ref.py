"""A small pure-Python reference model of the queue protocol, for the model-based test.

It knows what every transition must do to every job, lane tag, serial-lane holder and
the virtual time of fair lanes; the state machine in ``model_machine`` runs the real
scripts beside it and compares the server's keyspace with it after every step.

Time is the server's: the model never guesses a clock. It records the deadlines and due
times the server reported (each checked against the server's ``TIME`` read before and
after the call), and a lease or delay is only "expired"/"due" once the machine has
polled the server clock past it (``expired``/``due`` flags).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from echomq import Completion, RetryOutcome


@dataclass
class Job:
    payload: bytes
    lane: str | None = None
    serial: bool = False
    max: int | None = None
    state: str = "pending"  # pending | active | delayed | done | dead
    attempts: int = 0
    failures: int = 0
    score: int = 0  # pending: the fair-lane start tag (0 without a lane or as the lane's head)
    deadline: int = 0  # active: the lease deadline the server reported (server ms)
    expired: bool = False  # active, and the server clock is past the deadline
    due: int = 0  # delayed: due time (server ms), pinned from the server, bracket-checked
    due_known: bool = False
    ripe: bool = False  # delayed, and the server clock is past the due time
    at: tuple[int, int] = (0, 0)  # done/dead: bracket of the entry time (server ms)
    at_exact: int | None = None


@dataclass
class Ref:
    max_attempts: int
    jobs: dict[str, Job] = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)  # ids whose rows were deleted
    vtime: int = 0
    lanes: dict[str, int] = field(default_factory=dict)  # lane -> last start tag, while waiting
    inflight: dict[str, str] = field(default_factory=dict)  # serial lane -> the job holding it
    seen: Counter[str] = field(default_factory=Counter)  # what the run reached (see REACH)

    # ------------------------------------------------------------------ views
    def ids(self, state: str) -> list[str]:
        return sorted(i for i, j in self.jobs.items() if j.state == state)

    def pending_order(self) -> list[str]:
        return [i for _, i in sorted((j.score, i) for i, j in self.jobs.items()
                                     if j.state == "pending")]

    def live(self, jid: str, attempt: int) -> bool:
        job = self.jobs.get(jid)
        return bool(job and job.state == "active" and not job.expired and job.attempts == attempt)

    def holds(self, jid: str, attempt: int) -> bool:
        """The attempt holds a live lease: active, same token, deadline not passed."""
        job = self.jobs.get(jid)
        if job and job.state == "active" and job.attempts == attempt and job.expired:
            self.seen["expired lease refused"] += 1
        elif job and job.state == "active" and job.attempts != attempt:
            self.seen["other attempt's token refused"] += 1
        return self.live(jid, attempt)

    def _limit(self, job: Job) -> int:
        return job.max if job.max is not None else self.max_attempts

    def _head(self, jid: str) -> bool:
        lane = self.jobs[jid].lane
        return lane is not None and self.inflight.get(lane) == jid

    # ------------------------------------------------------------------ helpers
    def pend(self, jid: str, head: bool) -> None:
        job = self.jobs[jid]
        score = 0
        if job.lane and not head:
            score = max(self.vtime, self.lanes.get(job.lane, 0)) + 1
            self.lanes[job.lane] = score
            self.seen["fair tag behind another" if score > 1 else "fair tag"] += 1
        elif job.lane:
            self.seen["lane head goes first"] += 1
        job.state, job.score, job.expired = "pending", score, False

    def release(self, jid: str) -> None:
        lane = self.jobs[jid].lane
        if lane is not None and self.inflight.get(lane) == jid:
            del self.inflight[lane]

    def _finish(self, jid: str, state: str, at: tuple[int, int]) -> None:
        job = self.jobs[jid]
        job.state, job.at, job.at_exact, job.expired = state, at, None, False

    # -------------------------------------------------------------- transitions
    def admit(self, jid: str, payload: bytes, lane: str | None = None, serial: bool = False,
              max_attempts: int | None = None, delayed: bool = False) -> bool:
        if jid in self.jobs:
            return False
        self.gone.discard(jid)
        self.jobs[jid] = Job(payload=payload, lane=lane, serial=serial and lane is not None,
                             max=max_attempts)
        if delayed:
            self.jobs[jid].state = "delayed"
        else:
            self.pend(jid, head=False)
        return True

    def claim(self, candidates: list[str], count: int) -> list[str]:
        out: list[str] = []
        top = 0
        for jid in candidates:
            if len(out) >= count:
                break
            job = self.jobs.get(jid)
            if job is None or job.state != "pending":
                continue
            if job.serial and job.lane is not None and self.inflight.get(job.lane, jid) != jid:
                self.seen["serial lane held: skipped"] += 1
                continue
            job.state, job.attempts, job.expired = "active", job.attempts + 1, False
            if job.lane is not None:
                if job.serial:
                    self.inflight[job.lane] = jid
                if self.lanes.get(job.lane) == job.score:
                    del self.lanes[job.lane]
                top = max(top, job.score)
            out.append(jid)
            self.seen[f"claimed on lane {job.lane}"] += 1
        self.vtime = max(self.vtime, top)
        return out

    def complete(self, jid: str, attempt: int, keep: bool, at: tuple[int, int]) -> Completion:
        if not self.holds(jid, attempt):
            return Completion.STALE
        self.release(jid)
        self.seen["done" if keep else "done and deleted at once"] += 1
        if keep:
            self._finish(jid, "done", at)
        else:
            del self.jobs[jid]
            self.gone.add(jid)
        return Completion.COMPLETED

    def retry(self, jid: str, attempt: int, fail: bool, delay: bool,
              at: tuple[int, int]) -> RetryOutcome:
        if not self.holds(jid, attempt):
            return RetryOutcome.STALE
        job = self.jobs[jid]
        if fail:
            job.failures += 1
            if job.failures >= self._limit(job):
                self.release(jid)
                self._finish(jid, "dead", at)
                self.seen["dead by failures"] += 1
                return RetryOutcome.DEAD
        if delay:
            job.state, job.due_known, job.ripe, job.expired = "delayed", False, False, False
        else:
            self.pend(jid, head=self._head(jid))
        return RetryOutcome.SCHEDULED

    def reap(self, at: tuple[int, int]) -> tuple[int, int]:
        expired = sorted((j.deadline, i) for i, j in self.jobs.items()
                         if j.state == "active" and j.expired)
        requeued = dead = 0
        for _, jid in expired:
            job = self.jobs[jid]
            job.failures += 1
            if job.failures >= self._limit(job):
                self.release(jid)
                self._finish(jid, "dead", at)
                self.seen["dead by reap"] += 1
                dead += 1
            else:
                self.seen["expired lease requeued"] += 1
                self.pend(jid, head=self._head(jid))
                requeued += 1
        return requeued, dead

    def promote(self) -> int:
        ripe = sorted((j.due, i) for i, j in self.jobs.items() if j.state == "delayed" and j.ripe)
        self.seen["promoted"] += len(ripe)
        for _, jid in ripe:
            self.pend(jid, head=self._head(jid))
        return len(ripe)

    def finished_order(self, state: str) -> list[str]:
        """Ids in ``state`` (done or dead) in the set's order: entry time, then id."""
        rows = [(j.at_exact, i) for i, j in self.jobs.items() if j.state == state]
        assert all(at is not None for at, _ in rows), "entry times are pinned by the invariant"
        return [i for _, i in sorted(rows)]  # type: ignore[type-var]

    def requeue_dead(self, limit: int) -> int:
        chosen = self.finished_order("dead")[:limit]
        self.seen["dead requeued"] += len(chosen)
        for jid in chosen:
            self.jobs[jid].failures = 0
            self.pend(jid, head=False)
        return len(chosen)

    def purge(self, state: str, limit: int) -> int:
        chosen = self.finished_order(state)[:limit]
        self.seen[f"{state} purged"] += len(chosen)
        for jid in chosen:
            del self.jobs[jid]
            self.gone.add(jid)
        return len(chosen)
