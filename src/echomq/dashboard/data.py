"""What the dashboard reads, through the Queue API and plain reads of the queue's keys.

Reads only: every change the dashboard makes goes through :mod:`echomq.dashboard.actions`
and the queue's own transitions. A queue is found by its ``emq:{q}:meta`` key (written
at its first admission), with ``SCAN`` on every primary.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from echomq import ids, keyspace
from echomq._async.cluster import AsyncClusterConnector
from echomq._async.connector import AsyncConnector
from echomq._async.queue import AsyncQueue
from echomq.model import JobView, Stats

__all__ = ["JobDetail", "LaneInfo", "QueueSummary", "discover", "job_detail", "lanes", "summary"]

Conn = AsyncConnector | AsyncClusterConnector
BACKLOG_PEEK = 2000  # pending rows read to count each lane's backlog: bounded work per page view


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


@dataclass(frozen=True, slots=True)
class QueueSummary:
    name: str
    counts: Stats
    now_ms: int
    oldest_pending_ms: int | None  # admission time of the oldest waiting job (server ms)
    workers: list[dict[str, Any]] = field(default_factory=list)

    @property
    def oldest_pending_age_s(self) -> float | None:
        if self.oldest_pending_ms is None:
            return None
        return max(0.0, (self.now_ms - self.oldest_pending_ms) / 1000)


async def discover(conn: Conn) -> list[str]:
    """Every queue on the server (or cluster), sorted."""
    nodes = [conn]
    if isinstance(conn, AsyncClusterConnector):
        await conn.refresh()
        nodes = [conn.node(addr) for addr in conn.primaries]
    names: set[str] = set()
    pattern = f"{keyspace.PREFIX}:{{*}}:meta"
    for node in nodes:
        cursor: Any = 0
        while True:
            cursor, found = await node.command("SCAN", cursor, "MATCH", pattern, "COUNT", 1000)
            for key in found:
                try:
                    names.add(keyspace.check_queue(keyspace.hash_tag(key).decode(errors="replace")))
                except ValueError:
                    continue  # not a key of ours
            if int(cursor) == 0:
                break
    return sorted(names)


async def _workers(conn: Conn, name: str, now_ms: int) -> list[dict[str, Any]]:
    """Live workers registered on the queue (``emq:{q}:workers``, deadline-scored)."""
    live = await conn.command("ZRANGE", keyspace.queue_key(name, "workers"), now_ms, "+inf",
                              "BYSCORE", "WITHSCORES")
    out = []
    pairs = live if live and isinstance(live[0], list | tuple) else list(zip(live[::2], live[1::2],
                                                                             strict=True))
    for worker, deadline in pairs:
        raw = await conn.command("HGET", keyspace.queue_key(name, "workers:about"), worker)
        try:
            about = json.loads(raw) if raw else {}
        except ValueError:
            about = {}
        out.append({"name": _text(worker), "deadline_ms": int(float(deadline)),
                    **(about if isinstance(about, dict) else {})})
    return out


async def summary(conn: Conn, name: str) -> QueueSummary:
    """One queue's counts, oldest waiting job and live workers."""
    q = AsyncQueue(conn, name)
    counts = await q.stats()
    now = await conn.server_time_ms()
    # The next jobs to be served: unlaned ones score 0 (in id order), laned ones their tag.
    first = [await conn.command("ZRANGE", q.keys["pending"], 0, 0, "BYSCORE", "LIMIT", 0, 1),
             await conn.command("ZRANGE", q.keys["pending"], "(0", "+inf", "BYSCORE", "LIMIT", 0, 1)]
    stamps = [ids.timestamp_ms(_text(r[0])) for r in first if r and ids.valid(_text(r[0]))]
    return QueueSummary(name=name, counts=counts, now_ms=now,
                        oldest_pending_ms=min(stamps) if stamps else None,
                        workers=await _workers(conn, name, now))


@dataclass(frozen=True, slots=True)
class LaneInfo:
    name: str
    backlog: int  # waiting jobs of the lane among the first BACKLOG_PEEK pending ones
    holder: str | None  # the job holding a serial lane, if one does


async def lanes(conn: Conn, name: str) -> tuple[list[LaneInfo], int, bool]:
    """(lanes by backlog, lanes with a waiting job, whether the peek covered all pending)."""
    q = AsyncQueue(conn, name)
    waiting = await conn.command("HLEN", q.keys["lanes"])
    held = {_text(k): _text(v) for k, v in (await conn.command("HGETALL", q.keys["inflight"])).items()}
    views = await q.browse("pending", limit=BACKLOG_PEEK)
    backlog = Counter(v.row["lane"].decode(errors="replace") for v in views if v.row.get("lane"))
    names = sorted(set(backlog) | set(held), key=lambda lane: (-backlog[lane], lane))
    complete = len(views) < BACKLOG_PEEK
    return [LaneInfo(n, backlog[n], held.get(n)) for n in names], int(waiting), complete


@dataclass(frozen=True, slots=True)
class JobDetail:
    queue: str
    id: str
    row: dict[str, bytes]
    score: float | None  # its score in its state's set: lease deadline, due time, finish time
    now_ms: int

    @property
    def state(self) -> str:
        return self.row.get("state", b"").decode(errors="replace")

    def field(self, name: str) -> str:
        return self.row.get(name, b"").decode(errors="replace")


async def job_detail(conn: Conn, name: str, job_id: str) -> JobDetail | None:
    """One job's row and where it stands, or None if there is no such job."""
    q = AsyncQueue(conn, name)
    row = await q.job(job_id)  # InvalidJobId for a malformed id, before any I/O
    if row is None:
        return None
    state = row.get("state", b"").decode(errors="replace")
    score = None
    if state in q.keys:
        raw = await conn.command("ZSCORE", q.keys[state], job_id)
        score = float(raw) if raw is not None else None
    return JobDetail(queue=name, id=job_id, row=row, score=score, now_ms=await conn.server_time_ms())


async def page(conn: Conn, name: str, state: str, offset: int, limit: int) -> list[JobView]:
    return await AsyncQueue(conn, name).browse(state, offset=offset, limit=limit)
