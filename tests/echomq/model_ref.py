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

from echomq import CancelOutcome, Completion, ProgressOutcome, RetryOutcome
from echomq.protocol.gate import PRIORITY_AGE

HEAD = -(2**50)  # a serial lane's head scores below every tag (include/pend.lua)

NOW = -1  # a log entry written by the claim being modelled: its time is the claim's own now


@dataclass
class Job:
    payload: bytes
    lane: str | None = None
    serial: bool = False
    max: int | None = None
    prio: int = 0
    timeout: int | None = None  # the job's own handler timeout (ms), given at admission
    state: str = "pending"  # pending | active | delayed | done | dead | cancelled (done set)
    #                         | expired (never started by its deadline, decision 0045)
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
    cancel: bool = False  # a cancel was asked while it ran: every end of the attempt cancels
    result: bytes | None = None  # what the completing attempt left in the row
    progress: bytes | None = None  # the last report of an attempt holding a live lease
    exp: int | None = None  # the deadline to start by (server ms, read from the row), if any
    exp_passed: bool = False  # the server clock is past exp (the machine polled it)


SET_OF = {"pending": "pending", "active": "active", "delayed": "delayed", "done": "done",
          "dead": "dead", "cancelled": "done", "expired": "expired"}


@dataclass
class Ref:
    max_attempts: int
    jobs: dict[str, Job] = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)  # ids whose rows were deleted
    vtime: int = 0
    lanes: dict[str, int] = field(default_factory=dict)  # lane -> last start tag, while waiting
    inflight: dict[str, str] = field(default_factory=dict)  # serial lane -> the job holding it
    seen: Counter[str] = field(default_factory=Counter)  # what the run reached (see REACH)
    # the claim gate: the model's windows never end inside a step (the machine uses a long
    # window, or waits a short one out before each claim: then the logs are empty)
    paused: bool = False
    rate: tuple[int, int] | None = None  # (max, window ms)
    lane_rate: tuple[int, int] | None = None
    qlog: list[int] = field(default_factory=list)  # the queue's lease times, newest first
    llog: dict[str, list[int]] = field(default_factory=dict)  # lane -> its lease times
    held: list[int] = field(default_factory=list)  # the last claim: dues of held-back tokens
    # expiry (decision 0045): the expiring index, id -> (deadline, passed); it holds every
    # waiting job with a deadline and stale entries of jobs that stopped waiting otherwise
    # (cancelled, purged) until the reaper meets them past their deadline
    index: dict[str, tuple[int, bool]] = field(default_factory=dict)
    lapsed: list[str] = field(default_factory=list)  # the last claim: jobs it ended expired

    # ------------------------------------------------------------------ views
    def ids(self, state: str) -> list[str]:
        return sorted(i for i, j in self.jobs.items() if j.state == state)

    def members(self, zset: str) -> list[str]:
        """The ids in one of the five state sets: the done set holds cancelled rows too."""
        return sorted(i for i, j in self.jobs.items() if SET_OF[j.state] == zset)

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
    def line(self, job: Job) -> str | None:
        """The line a job's fair-queuing tag is drawn on: its lane, '' for a priority."""
        return job.lane if job.lane is not None else ("" if job.prio else None)

    def pend(self, jid: str, head: bool) -> None:
        # The rule of include/pend.lua (docs/protocol.md "Priorities"), written from the
        # prose, not the Lua: tag on the virtual time, minus p * AGE; a plain job's tag is
        # vtime itself; a job holding its serial lane goes before every other (HEAD - p).
        job = self.jobs[jid]
        line = self.line(job)
        if head:
            score = HEAD - job.prio
            self.seen["lane head goes first"] += 1
        elif line is None:
            score = self.vtime
            self.seen["plain tag is vtime" if self.vtime else "plain tag"] += 1
        else:
            score = max(self.vtime, self.lanes.get(line, 0)) + 1
            self.lanes[line] = score
            self.seen["fair tag behind another" if score > 1 else "fair tag"] += 1
        if job.prio:
            self.seen["priority tag"] += 1
        if not head:
            score -= job.prio * PRIORITY_AGE
        job.state, job.score, job.expired = "pending", score, False

    def release(self, jid: str) -> None:
        lane = self.jobs[jid].lane
        if lane is not None and self.inflight.get(lane) == jid:
            del self.inflight[lane]

    def set_deadline(self, jid: str, exp: int, passed: bool) -> None:
        """A job just admitted with ``expires_ms``: the deadline its row holds."""
        job = self.jobs[jid]
        job.exp, job.exp_passed = exp, passed
        self.index[jid] = (exp, passed)

    def _reindex(self, jid: str) -> None:
        """A job waiting again (retry, reap, requeue) keeps its deadline: back on the index."""
        job = self.jobs[jid]
        if job.exp is not None:
            self.index[jid] = (job.exp, job.exp_passed)

    def _finish(self, jid: str, state: str, at: tuple[int, int]) -> None:
        job = self.jobs[jid]
        job.state, job.at, job.at_exact, job.expired = state, at, None, False

    # -------------------------------------------------------------- transitions
    def admit(self, jid: str, payload: bytes, lane: str | None = None, serial: bool = False,
              max_attempts: int | None = None, delayed: bool = False, prio: int = 0,
              timeout: int | None = None) -> bool:
        if jid in self.jobs:
            return False
        self.gone.discard(jid)
        self.jobs[jid] = Job(payload=payload, lane=lane, serial=serial and lane is not None,
                             max=max_attempts, prio=prio, timeout=timeout)
        if delayed:
            self.jobs[jid].state = "delayed"
        else:
            self.pend(jid, head=False)
        return True

    def _take(self, job: Job, used: int) -> bool:
        """The claim gate for one more lease (include/gate.lua); a hold records its due."""
        if self.paused:
            return False
        if self.rate:
            qmax, ms = self.rate
            back = qmax - used - 1
            t = NOW if back < 0 else (self.qlog[back] if back < len(self.qlog) else None)
            if t is not None:
                self.held.append(t if t == NOW else t + ms)
                self.seen["queue rate held"] += 1
                return False
        if self.lane_rate and job.lane is not None:
            lmax, ms = self.lane_rate
            log = self.llog.setdefault(job.lane, [])
            if len(log) >= lmax:
                t = log[len(log) - lmax]
                self.held.append(t if t == NOW else t + ms)
                self.seen["lane rate held"] += 1
                return False
            log.append(NOW)
        return True

    def claim(self, candidates: list[str], count: int) -> list[str]:
        out: list[str] = []
        top = 0
        self.held, self.lapsed = [], []
        for jid in candidates:
            if len(out) >= count:
                break
            job = self.jobs.get(jid)
            if job is None or job.state != "pending":
                continue
            if job.exp is not None and job.exp_passed:  # past its deadline: never leased
                self.index.pop(jid, None)
                self.release(jid)
                self._finish(jid, "expired", (0, 0))  # the machine pins the claim's time
                self.lapsed.append(jid)
                self.seen["expired by claim"] += 1
                continue
            if job.serial and job.lane is not None and self.inflight.get(job.lane, jid) != jid:
                self.seen["serial lane held: skipped"] += 1
                continue
            if not self._take(job, len(out)):
                continue
            job.state, job.attempts, job.expired = "active", job.attempts + 1, False
            self.index.pop(jid, None)  # started in time: off the index
            line = self.line(job)
            if line is not None:
                if job.serial:
                    self.inflight[line] = jid
                tag = job.score + job.prio * PRIORITY_AGE
                if self.lanes.get(line) == tag:
                    del self.lanes[line]
                top = max(top, tag)
            out.append(jid)
            self.seen[f"claimed on lane {job.lane}"] += 1
            self.seen[f"claimed at priority {job.prio}"] += 1
        self.vtime = max(self.vtime, top)
        if self.paused and candidates:
            self.seen["paused claim"] += 1
        return out

    def handoff(self, jid: str) -> bool:
        """A plain job just admitted to the empty queue, a consumer parked: leased to it in
        the admission's step (include/handoff.lua) unless the gate holds it (pause, the
        queue's rate: a hand-off has no lane). True when it was handed off."""
        job = self.jobs[jid]
        self.held = []
        if not self._take(job, 0):
            return False
        job.state, job.attempts, job.expired = "active", 1, False
        return True

    def logged(self, leased: int, now: int | None) -> None:
        """After a claim: ``leased`` leases at the server's ``now`` (from a lease; None when
        nothing was leased) go into the logs, trimmed as the gate trims them."""
        for lane, log in list(self.llog.items()):
            if NOW in log and now is not None:  # only a lane that took is written back
                log[:] = [now if t == NOW else t for t in log]
                if self.lane_rate:
                    del log[: max(0, len(log) - self.lane_rate[0])]
            if not log:
                del self.llog[lane]
        if self.rate and now is not None and leased:
            self.qlog[:0] = [now] * min(leased, self.rate[0])
            del self.qlog[self.rate[0]:]

    def set_limits(self, rate: tuple[int, int] | None, lane_rate: tuple[int, int] | None) -> None:
        self.rate, self.lane_rate = rate, lane_rate
        if rate:
            del self.qlog[rate[0]:]

    def forget_logs(self) -> None:
        """A short window was waited out: every log entry left it (and the keys expired)."""
        self.qlog.clear()
        self.llog.clear()

    def complete(self, jid: str, attempt: int, keep: bool, at: tuple[int, int],
                 result: bytes = b"") -> Completion:
        if not self.holds(jid, attempt):
            return Completion.STALE
        self.release(jid)
        if self.jobs[jid].cancel:  # asked to stop: cancelled, kept whatever keep says
            self._finish(jid, "cancelled", at)
            self.seen["cancelled by complete"] += 1
            return Completion.CANCELLED
        self.seen["done" if keep else "done and deleted at once"] += 1
        if keep:
            self._finish(jid, "done", at)
            self.jobs[jid].result = result or None
        else:
            del self.jobs[jid]
            self.gone.add(jid)
        return Completion.COMPLETED

    def retry(self, jid: str, attempt: int, fail: bool, delay: bool,
              at: tuple[int, int], *, give_up: bool = False) -> RetryOutcome:
        if not self.holds(jid, attempt):
            return RetryOutcome.STALE
        job = self.jobs[jid]
        if job.cancel:
            self.release(jid)
            self._finish(jid, "cancelled", at)
            self.seen["cancelled by retry"] += 1
            return RetryOutcome.CANCELLED
        if fail:
            job.failures += 1
            if give_up or job.failures >= self._limit(job):
                self.release(jid)
                self._finish(jid, "dead", at)
                self.seen["dead by giving up" if give_up and job.failures < self._limit(job)
                          else "dead by failures"] += 1
                return RetryOutcome.DEAD
        if delay:
            job.state, job.due_known, job.ripe, job.expired = "delayed", False, False, False
        else:
            self.pend(jid, head=self._head(jid))
        self._reindex(jid)  # a retry's wait counts against the deadline
        return RetryOutcome.SCHEDULED

    def reap(self, at: tuple[int, int]) -> tuple[int, int, int]:
        expired = sorted((j.deadline, i) for i, j in self.jobs.items()
                         if j.state == "active" and j.expired)
        requeued = dead = cancelled = 0
        for _, jid in expired:
            job = self.jobs[jid]
            if job.cancel:
                self.release(jid)
                self._finish(jid, "cancelled", at)
                self.seen["cancelled by reap"] += 1
                cancelled += 1
                continue
            job.failures += 1
            if job.failures >= self._limit(job):
                self.release(jid)
                self._finish(jid, "dead", at)
                self.seen["dead by reap"] += 1
                dead += 1
            else:
                self.seen["expired lease requeued"] += 1
                self.pend(jid, head=self._head(jid))
                self._reindex(jid)
                requeued += 1
        return requeued, dead, cancelled

    def cancel(self, ids: list[str], at: tuple[int, int]) -> list[CancelOutcome]:
        out = []
        for jid in ids:
            job = self.jobs.get(jid)
            if job is not None and job.state in ("pending", "delayed"):
                self.seen[f"cancelled {job.state}"] += 1
                self.release(jid)
                self._finish(jid, "cancelled", at)
                out.append(CancelOutcome.CANCELLED)
            elif job is not None and job.state == "active":
                self.seen["cancel asked"] += 1
                job.cancel = True
                out.append(CancelOutcome.ASKED)
            else:
                out.append(CancelOutcome.LEFT)
        return out

    def progress(self, jid: str, attempt: int, report: bytes) -> ProgressOutcome:
        if not self.holds(jid, attempt):
            self.seen["stale progress refused"] += 1
            return ProgressOutcome.STALE
        job = self.jobs[jid]
        job.progress = report
        self.seen["progress recorded"] += 1
        return ProgressOutcome.STOP if job.cancel else ProgressOutcome.RECORDED

    def promote(self) -> int:
        ripe = sorted((j.due, i) for i, j in self.jobs.items() if j.state == "delayed" and j.ripe)
        self.seen["promoted"] += len(ripe)
        for _, jid in ripe:
            self.pend(jid, head=self._head(jid))
        return len(ripe)

    def finished_order(self, state: str) -> list[str]:
        """Ids in ``state`` (done or dead) in the set's order: entry time, then id."""
        rows = [(j.at_exact, i) for i, j in self.jobs.items() if SET_OF[j.state] == state]
        assert all(at is not None for at, _ in rows), "entry times are pinned by the invariant"
        return [i for _, i in sorted(rows)]  # type: ignore[type-var]

    def requeue_dead(self, limit: int) -> int:
        chosen = self.finished_order("dead")[:limit]
        self.seen["dead requeued"] += len(chosen)
        for jid in chosen:
            self.jobs[jid].failures = 0
            self.pend(jid, head=False)
            self._reindex(jid)
        return len(chosen)

    def expire(self, batch: int, at: tuple[int, int]) -> tuple[int, int]:
        """The expiry reaper: of the first ``batch`` index entries (deadline, then id), each
        past its deadline leaves the index; its job ends expired if it still waits."""
        expired = dropped = 0
        for jid, (_, passed) in sorted(self.index.items(), key=lambda kv: (kv[1][0], kv[0]))[:batch]:
            if not passed:
                continue
            del self.index[jid]
            job = self.jobs.get(jid)
            if job is not None and job.state in ("pending", "delayed"):
                self.release(jid)
                self._finish(jid, "expired", at)
                self.seen["expired by the reaper"] += 1
                expired += 1
            else:
                self.seen["stale deadline dropped"] += 1
                dropped += 1
        return expired, dropped

    def purge(self, state: str, limit: int) -> int:
        chosen = self.finished_order(state)[:limit]
        self.seen[f"{state} purged"] += len(chosen)
        for jid in chosen:
            del self.jobs[jid]
            self.gone.add(jid)
        return len(chosen)
