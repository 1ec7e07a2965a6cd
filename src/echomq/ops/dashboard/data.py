"""What the dashboard reads, through the Queue API and plain reads of the queue's keys.

Reads only: every change the dashboard makes goes through :mod:`echomq.ops.dashboard.actions`
and the queue's own transitions. The overview is :mod:`echomq.client.info` (what ``echomq
info`` prints); pages, lanes and single jobs are read through the Queue API.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from echomq.client._async.cluster import AsyncClusterConnector
from echomq.client._async.connector import AsyncConnector
from echomq.client._async.sharded import AsyncShardedQueue
from echomq.client.info import QueueInfo, discover_queues, queue_info
from echomq.client.logical import open_queue
from echomq.core.model import JobView
from echomq.protocol.decoders import text
from echomq.protocol.gate import Gate, decode_gate
from echomq.protocol.sharding import record_key

__all__ = ["JobDetail", "LaneInfo", "discover", "job_detail", "lanes", "page", "summary"]

Conn = AsyncConnector | AsyncClusterConnector
BACKLOG_PEEK = 2000  # pending rows read to count each lane's backlog: bounded work per page view



async def discover(conn: Conn) -> list[str]:
    """Every queue on the server (or cluster), sorted (:func:`echomq.client.info.discover_queues`)."""
    return await discover_queues(conn)


async def summary(conn: Conn, name: str) -> QueueInfo:
    """One queue's counts, recent rates, oldest waiting job and live workers, read in one
    consistent look (:func:`echomq.client.info.queue_info`, the same as ``echomq info``)."""
    return await queue_info(conn, name)


_GATE = ("paused", "rate_max", "rate_ms", "lane_max", "lane_ms")


async def _gate_fields(conn: Conn, key: str) -> dict[str, int]:
    return {text(k): int(text(v)) for k, v in (await conn.command("HGETALL", key)).items()
            if text(k) in _GATE}


async def gate(conn: Conn, name: str) -> Gate | None:
    """The queue's claim gate (paused, rate limits), read with plain HGETALLs, so the
    read-only role (which may not run the pause script) sees it too. A sharded queue's
    is the logical one: paused while any shard is, the limits its record holds
    (docs/decisions/0031-sharded-gate.md)."""
    q = await open_queue(conn, name)
    if isinstance(q, AsyncShardedQueue):
        fields = await _gate_fields(conn, record_key(name))
        paused = [(await _gate_fields(conn, s.keys["meta"])).get("paused", 0) for s in q.shards]
        fields["paused"] = int(any(paused))
    else:
        fields = await _gate_fields(conn, q.keys["meta"])
    return decode_gate([fields.get(f, 0) for f in _GATE])


@dataclass(frozen=True, slots=True)
class LaneInfo:
    name: str
    backlog: int  # waiting jobs of the lane among the first BACKLOG_PEEK pending ones
    holder: str | None  # the job holding a serial lane, if one does


async def lanes(conn: Conn, name: str) -> tuple[list[LaneInfo], int, bool]:
    """(lanes by backlog, lanes with a waiting job, whether the peek covered all pending).
    A sharded queue's lanes are its shards' (each lane lives in one shard)."""
    logical = await open_queue(conn, name)
    waiting, held = 0, dict[str, str]()
    for q in logical.shards if isinstance(logical, AsyncShardedQueue) else [logical]:
        waiting += int(await conn.command("HLEN", q.keys["lanes"]))
        held |= {text(k): text(v)
                 for k, v in (await conn.command("HGETALL", q.keys["inflight"])).items()}
    views = await logical.browse("pending", limit=BACKLOG_PEEK)
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
    logical = await open_queue(conn, name)
    row: dict[str, bytes] | None = None
    for q in logical.shards if isinstance(logical, AsyncShardedQueue) else [logical]:
        row = await q.job(job_id)  # InvalidJobId for a malformed id, before any I/O
        if row is not None:
            break
    if row is None:
        return None
    state = row.get("state", b"").decode(errors="replace")
    score = None
    zset = "done" if state == "cancelled" else state  # cancelled rows live in the done set
    if zset in q.keys:
        raw = await conn.command("ZSCORE", q.keys[zset], job_id)
        score = float(raw) if raw is not None else None
    return JobDetail(queue=name, id=job_id, row=row, score=score, now_ms=await conn.server_time_ms())


async def page(conn: Conn, name: str, state: str, offset: int, limit: int) -> list[JobView]:
    return await (await open_queue(conn, name)).browse(state, offset=offset, limit=limit)
