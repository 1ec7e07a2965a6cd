"""The queue half of the chaos run: a producer, consumer processes, probes, and the checks.

One :class:`QueueWorkload` drives one queue on one deployment (the single server or
the cluster). The producer admits small batches at a steady rate and keeps every id
the server acknowledged (``ENQUEUED`` or ``DUPLICATE``; on the cluster the queue is
durable, so only ids a replica confirmed count). Consumers are
:mod:`codemojex.chaos.worker` processes, which the fault injector kills, pauses and
replaces. :meth:`QueueWorkload.check` reads every row and every worker's log and
reports what the issue asks for: lost, in two states, completed twice, completed by
a stale attempt, completed without its handler ending.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from echomq import AsyncQueue, QueueOptions, Verdict, end_with_parent, generate

__all__ = ["QueueReport", "QueueWorkload", "WorkerProc"]

STATES = ("pending", "active", "delayed", "done", "dead")


@dataclass(slots=True)
class WorkerProc:
    proc: subprocess.Popen[bytes]
    log: Path
    started: float


@dataclass(slots=True)
class QueueReport:
    acked: int = 0
    done: int = 0
    dead: int = 0
    queued: int = 0  # still pending/active/delayed after the drain
    lost: list[str] = field(default_factory=list)
    two_states: list[str] = field(default_factory=list)
    completed_twice: list[str] = field(default_factory=list)
    stale_completions: list[str] = field(default_factory=list)
    unended: list[str] = field(default_factory=list)  # done, but its completing attempt never ended
    dead_without_error: list[str] = field(default_factory=list)
    rerun: int = 0  # handler started in 2+ attempts (at-least-once after a fault)
    ended_twice: int = 0  # handler ran to its end in 2+ attempts
    stale_refused: int = 0  # completions the fence refused
    poison_dead: int = 0

    @property
    def failures(self) -> list[str]:
        out = []
        for name in ("lost", "two_states", "completed_twice", "stale_completions", "unended",
                     "dead_without_error"):
            items = getattr(self, name)
            if items:
                out.append(f"{len(items)} {name.replace('_', ' ')}: {items[:5]}")
        if self.queued:
            out.append(f"{self.queued} jobs still queued after the drain")
        return out


class QueueWorkload:
    """Producer + consumer processes on ``queue`` at ``url`` (``cluster`` for a cluster URL)."""

    def __init__(self, name: str, url: str, queue: str, logdir: Path, *, conn: Any,
                 scan: Callable[[], redis.Redis], cluster: bool, workers: int, rate: float,
                 lease_ms: int) -> None:
        self.name, self.url, self.queue_name = name, url, queue
        self.logdir, self.cluster = logdir, cluster
        durable = 1 if cluster else 0
        self.queue = AsyncQueue(conn, queue, options=QueueOptions(durable_replicas=durable))
        self.probe_queue = AsyncQueue(conn, queue)  # probes: same keys, never waits for a replica
        self.scan = scan  # a plain client of the node that holds the queue's slot now
        self.nworkers, self.rate, self.lease_ms = workers, rate, lease_ms
        self.workers: list[WorkerProc] = []
        self.all_logs: list[Path] = []
        self.acked: set[str] = set()
        self.poison: set[str] = set()
        self.errors: Counter[str] = Counter()
        self.not_durable = 0
        self._stop = asyncio.Event()
        self._seq = 0

    # ------------------------------------------------------------ consumers
    def start_worker(self) -> WorkerProc:
        self._seq += 1
        log = self.logdir / f"{self.name}-worker-{self._seq}.log"
        args = [sys.executable, "-m", "codemojex.chaos.worker", self.url, self.queue_name, str(log),
                "--lease", str(self.lease_ms), *(["--cluster"] if self.cluster else [])]
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True, preexec_fn=end_with_parent())
        w = WorkerProc(proc, log, time.monotonic())
        self.workers.append(w)
        self.all_logs.append(log)
        return w

    def start(self) -> None:
        for _ in range(self.nworkers):
            self.start_worker()

    def replace(self, w: WorkerProc) -> WorkerProc:
        self.workers.remove(w)
        return self.start_worker()

    def stop_workers(self, timeout: float = 30.0) -> None:
        for w in self.workers:
            if w.proc.poll() is None:
                w.proc.send_signal(signal.SIGCONT)
                w.proc.send_signal(signal.SIGTERM)
        for w in self.workers:
            try:
                w.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                w.proc.kill()
                w.proc.wait()

    def kill_all(self) -> None:
        for w in self.workers:
            if w.proc.poll() is None:
                w.proc.kill()
                w.proc.wait()

    # ------------------------------------------------------------ producer
    async def produce(self, rng: random.Random) -> None:
        batch_size = 20
        period = batch_size / self.rate
        while not self._stop.is_set():
            t0 = time.monotonic()
            batch = []
            for _ in range(batch_size):
                jid = generate("JOB")
                roll = rng.random()
                if roll < 0.01:
                    self.poison.add(jid)
                batch.append((jid, b"poison" if roll < 0.01 else b"slow" if roll < 0.04 else b"work"))
            try:
                verdicts = await self.queue.enqueue_many(batch)
            except Exception as exc:  # the retry budget ran out during a fault: not acknowledged
                self.errors[_label(exc)] += 1
                continue
            for (jid, _), v in zip(batch, verdicts, strict=True):
                if v in (Verdict.ENQUEUED, Verdict.DUPLICATE):
                    self.acked.add(jid)
                else:
                    self.not_durable += 1
                    self.errors[_label(v)] += 1
            await asyncio.sleep(max(0.0, period - (time.monotonic() - t0)))

    def stop_producing(self) -> None:
        self._stop.set()

    async def probe(self, limit_s: float = 60.0) -> float:
        """Admit one job and wait until a consumer completed it; seconds taken (or limit_s)."""
        t0 = time.monotonic()
        jid = generate("JOB")
        while time.monotonic() - t0 < limit_s:
            try:
                if await self.probe_queue.enqueue(jid, b"probe") in (Verdict.ENQUEUED, Verdict.DUPLICATE):
                    break
            except Exception as exc:
                self.errors[_label(exc)] += 1
                await asyncio.sleep(0.05)
        self.acked.add(jid)
        while time.monotonic() - t0 < limit_s:
            try:
                row = await self.probe_queue.job(jid)
                if row and row.get("state") == b"done":
                    return time.monotonic() - t0
            except Exception as exc:
                self.errors[_label(exc)] += 1
            await asyncio.sleep(0.02)
        return limit_s

    async def rerun_after(self, log: Path, since: float, limit_s: float = 60.0) -> float:
        """Seconds from ``since`` until every job the worker with ``log`` had started and not
        ended is done or dead (it was killed or paused holding them)."""
        held = _held(log)
        while time.monotonic() - since < limit_s:
            rows = [await self.probe_queue.job(jid) for jid in held]
            if all(r is not None and r.get("state") in (b"done", b"dead") for r in rows):
                break
            await asyncio.sleep(0.05)
        return time.monotonic() - since

    async def outstanding(self) -> int:
        s = await self.probe_queue.stats()
        return s.pending + s.active + s.delayed

    # ------------------------------------------------------------ checks
    def check(self) -> QueueReport:
        r = QueueReport(acked=len(self.acked))
        client = self.scan()
        try:
            self._check(r, client)
        finally:
            client.close()
        return r

    def _check(self, r: QueueReport, client: redis.Redis) -> None:
        where: dict[str, str] = {}
        k = f"emq:{{{self.queue_name}}}"
        for state in STATES:
            for member in client.zrange(f"{k}:{state}", 0, -1):
                jid = member.decode() if isinstance(member, bytes) else str(member)
                if jid in where:
                    r.two_states.append(jid)
                where[jid] = state
        rows: dict[str, dict[bytes, bytes]] = {}
        pipe = client.pipeline(transaction=False)
        ids = list(where)
        for jid in ids:
            pipe.hgetall(f"{k}:job:{jid}")
        for jid, row in zip(ids, pipe.execute(), strict=True):
            rows[jid] = row
            if row.get(b"state", b"").decode() != where[jid]:
                r.two_states.append(jid)
        r.lost = sorted(jid for jid in self.acked if jid not in where)
        counts = Counter(where.values())
        r.done, r.dead = counts["done"], counts["dead"]
        r.queued = counts["pending"] + counts["active"] + counts["delayed"]
        for jid, state in where.items():
            if state == "dead":
                if not rows[jid].get(b"error"):
                    r.dead_without_error.append(jid)
                r.poison_dead += jid in self.poison
        starts: Counter[str] = Counter()
        ends: set[tuple[str, int]] = set()
        ended: Counter[str] = Counter()
        completed: Counter[str] = Counter()
        for log in self.all_logs:
            for kind, jid, attempt, verdict in _lines(log):
                if kind == "S":
                    starts[jid] += 1
                elif kind == "E":
                    ends.add((jid, attempt))
                    ended[jid] += 1
                elif kind == "C" and verdict == "completed":
                    completed[jid] += 1
                    row = rows.get(jid, {})
                    if row.get(b"state") != b"done" or int(row.get(b"attempts", b"0")) != attempt:
                        r.stale_completions.append(f"{jid}@{attempt}")
                elif kind == "C":
                    r.stale_refused += 1
        r.completed_twice = sorted(j for j, n in completed.items() if n > 1)
        r.rerun = sum(1 for j, n in starts.items() if n > 1 and j not in self.poison)
        r.ended_twice = sum(1 for n in ended.values() if n > 1)
        for jid, state in where.items():
            if state == "done" and (jid, int(rows[jid].get(b"attempts", b"0"))) not in ends:
                r.unended.append(jid)

    def worker_errors(self) -> int:
        """Transient errors the consumers rode out (from the stats of those that exited cleanly)."""
        total = 0
        for log in self.all_logs:
            for line in _read(log):
                if line.startswith("T "):
                    total += int(json.loads(line[2:]).get("errors", 0))
        return total


def _label(value: object) -> str:
    """``Type FIRSTWORD`` of an error (``ResponseError CLUSTERDOWN``), for the error tally."""
    word = str(value).split(" ", 1)[0][:24] if isinstance(value, Exception) else str(value)
    return f"{type(value).__name__} {word}".strip()


def _read(log: Path) -> list[str]:
    try:
        return log.read_text(encoding="ascii", errors="replace").splitlines()
    except FileNotFoundError:
        return []


def _lines(log: Path) -> list[tuple[str, str, int, str]]:
    out = []
    for line in _read(log):
        parts = line.split()
        if len(parts) >= 3 and parts[0] in ("S", "E", "C") and parts[2].isdigit():
            out.append((parts[0], parts[1], int(parts[2]), parts[3] if len(parts) > 3 else ""))
    return out


def _held(log: Path) -> set[str]:
    """Ids a worker started and had not ended or finished (by its log)."""
    held: set[str] = set()
    for kind, jid, _, _ in _lines(log):
        if kind == "S":
            held.add(jid)
        elif kind in ("E", "C"):
            held.discard(jid)
    return held
