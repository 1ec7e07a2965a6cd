"""What an operator sees: every queue on a server, its counts, rates, age and workers.

:func:`server_info` is what ``echomq info`` prints and what the dashboard shows: it
finds the queues (``SCAN`` for ``emq:{*}:meta`` on every primary), reads each with
the read-only ``info`` script (one consistent look per queue) and adds the server's
version and memory: used against ``maxmemory``, the policy, and whether a node is at
its limit (``refusing``: admissions get ``ServerFull`` while workers drain).
:func:`queue_info` reads one queue and raises :class:`~echomq.core.errors.QueueNotFound` for
a name that has never been written.

Rates come from the server, never from a sample taken by this process: the done and
dead sets are scored by the server time a job entered them, so the jobs finished in
the last minute are one ``ZCOUNT`` (exact while ``keep_done_ms`` keeps the rows; with
``keep_done_ms=0`` finished rows are deleted and only the workers' own counts remain).
Each live worker also publishes what it processed and failed in the last minute
(:mod:`echomq.client.registry`); those are summed per queue. The oldest pending age is read
from the ids of the next jobs to be served: a branded id carries the millisecond of
its admission (:func:`echomq.core.ids.timestamp_ms`), so it is the age since admission.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from echomq.client._async.cluster import AsyncClusterConnector
from echomq.client._async.connector import AsyncConnector
from echomq.client.logical import is_shard_name, layout_of
from echomq.core import ids
from echomq.core.errors import QueueNotFound
from echomq.core.memory import parse_info
from echomq.core.model import Stats
from echomq.protocol import keyspace
from echomq.protocol.decoders import text
from echomq.protocol.scripts import load

__all__ = ["WINDOW_MS", "QueueInfo", "ServerInfo", "WorkerInfo", "discover_queues", "queue_info",
           "server_info"]

WINDOW_MS = 60_000
"""The window of the recent counts: the last minute."""

_META = f"{keyspace.PREFIX}:{{*}}:meta"
_SHARDS = f"{keyspace.PREFIX}:{{*}}:shards"  # a sharded queue's record (echomq.protocol.sharding)



@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """One live worker of a queue, as it last described itself."""

    name: str
    queue: str
    deadline_ms: int  # its registration lapses then (server ms) unless it beats again
    about: dict[str, Any] = field(default_factory=dict)  # host, pid, concurrency, counts...

    @property
    def processed_last_minute(self) -> int:
        return int(self.about.get("last_minute", {}).get("processed", 0))

    @property
    def failed_last_minute(self) -> int:
        return int(self.about.get("last_minute", {}).get("failed", 0))


@dataclass(frozen=True, slots=True)
class QueueInfo:
    """One queue at one moment (server clock ``now_ms``)."""

    name: str
    counts: Stats
    completed_last_minute: int  # entered done within WINDOW_MS (server time)
    dead_last_minute: int  # entered dead within WINDOW_MS
    processed_last_minute: int  # summed over the live workers' own counts
    failed_last_minute: int  # handler failures the live workers counted
    oldest_pending_age_s: float | None  # since admission; None with nothing pending
    overdue_leases: int  # active jobs whose lease has expired, waiting for reap
    now_ms: int
    workers: list[WorkerInfo] = field(default_factory=list)
    expired_last_minute: int = 0  # entered expired within WINDOW_MS (decision 0045)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["counts"] = asdict(self.counts)
        return out


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """Every queue on one server (or cluster), plus what the server says about itself."""

    version: str
    used_memory: int | None
    maxmemory: int | None
    queues: list[QueueInfo]
    policy: str = ""  # maxmemory-policy ("noeviction" is the only safe one), nodes joined
    refusing: bool = False  # a node is at its maxmemory: admissions get ServerFull

    @property
    def workers(self) -> int:
        return len({w.name for q in self.queues for w in q.workers})

    def as_dict(self) -> dict[str, Any]:
        return {"version": self.version, "used_memory": self.used_memory, "maxmemory": self.maxmemory,
                "policy": self.policy, "refusing": self.refusing,
                "workers": self.workers, "queues": [q.as_dict() for q in self.queues]}

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2, sort_keys=True)


def _nodes(connector: AsyncConnector | AsyncClusterConnector) -> list[AsyncConnector]:
    if isinstance(connector, AsyncClusterConnector):
        return [connector.node(addr) for addr in connector.primaries]
    return [connector]


async def discover_queues(connector: AsyncConnector | AsyncClusterConnector) -> list[str]:
    """The names of every queue on the server (each has an ``emq:{q}:meta``), sorted; a
    sharded queue is listed once by its own name, its shards not at all."""
    if isinstance(connector, AsyncClusterConnector):
        await connector.refresh()
    names: set[str] = set()
    sharded: set[str] = set()
    for node in _nodes(connector):
        for pattern, into in ((_META, names), (_SHARDS, sharded)):
            cursor: Any = 0
            while True:
                cursor, found = await node.command("SCAN", cursor, "MATCH", pattern, "COUNT", 1000)
                for key in found:
                    name = keyspace.hash_tag(key).decode(errors="replace")
                    try:
                        into.add(keyspace.check_queue(name))
                    except ValueError:
                        continue  # not one of ours
                if int(cursor) == 0:
                    break
    return sorted({n for n in names if not is_shard_name(n, sharded)} | sharded)


def _age(first_ids: list[str], now_ms: int) -> float | None:
    stamps = [ids.timestamp_ms(i) for i in first_ids if ids.valid(i)]
    return max(0.0, (now_ms - min(stamps)) / 1000) if stamps else None


def _worker(queue: str, name: Any, deadline: Any, about: Any) -> WorkerInfo:
    try:
        desc = json.loads(about) if about else {}
    except ValueError:
        desc = {}
    return WorkerInfo(name=text(name), queue=queue, deadline_ms=int(float(deadline)),
                      about=desc if isinstance(desc, dict) else {})


async def queue_info(connector: AsyncConnector | AsyncClusterConnector, name: str) -> QueueInfo:
    """One queue's counts, rates, oldest pending age and workers; QueueNotFound if unknown.
    A sharded queue's figures are its shards' summed (the oldest age: the oldest of them)."""
    layout = await layout_of(connector, name)
    if layout is not None:
        parts = [await queue_info(connector, sub) if await _exists(connector, sub) else None
                 for sub in layout.names]
        return _merged(name, [x for x in parts if x is not None])
    k = {t: keyspace.queue_key(name, t) for t in ("pending", "active", "delayed", "done", "dead",
                                                 "meta", "workers", "workers:about", "expired")}
    reply = await connector.eval(load("info"), list(k.values()), [WINDOW_MS])
    exists, counts, done_recent, dead_recent = reply[0], reply[1:6], reply[6], reply[7]
    now, overdue, first = int(reply[8]), int(reply[9]), [text(reply[10]), text(reply[11])]
    if not exists and not any(int(c) for c in counts) and not int(reply[13]):
        raise QueueNotFound(f"queue {name!r} does not exist on this server")
    flat, expired, expired_recent = reply[12], int(reply[13]), int(reply[14])
    pending, active, delayed, done, dead = (int(c) for c in counts)
    workers = [_worker(name, flat[i], flat[i + 1], flat[i + 2]) for i in range(0, len(flat), 3)]
    return QueueInfo(
        name=name,
        counts=Stats(pending, active, delayed, done, dead, expired),
        expired_last_minute=expired_recent,
        completed_last_minute=int(done_recent),
        dead_last_minute=int(dead_recent),
        processed_last_minute=sum(w.processed_last_minute for w in workers),
        failed_last_minute=sum(w.failed_last_minute for w in workers),
        oldest_pending_age_s=_age(first, now),
        overdue_leases=overdue,
        now_ms=now,
        workers=workers,
    )


async def _exists(connector: AsyncConnector | AsyncClusterConnector, name: str) -> bool:
    return bool(await connector.command("EXISTS", keyspace.queue_key(name, "meta")))


def _merged(name: str, parts: list[QueueInfo]) -> QueueInfo:
    ages = [x.oldest_pending_age_s for x in parts if x.oldest_pending_age_s is not None]
    return QueueInfo(
        name=name,
        counts=Stats(*(sum(getattr(x.counts, s) for x in parts)
                       for s in keyspace.STATES)),
        expired_last_minute=sum(x.expired_last_minute for x in parts),
        completed_last_minute=sum(x.completed_last_minute for x in parts),
        dead_last_minute=sum(x.dead_last_minute for x in parts),
        processed_last_minute=sum(x.processed_last_minute for x in parts),
        failed_last_minute=sum(x.failed_last_minute for x in parts),
        oldest_pending_age_s=max(ages) if ages else None,
        overdue_leases=sum(x.overdue_leases for x in parts),
        now_ms=max((x.now_ms for x in parts), default=0),
        workers=[w for x in parts for w in x.workers],
    )


async def _memory(connector: AsyncConnector | AsyncClusterConnector,
                  ) -> tuple[str, int | None, int | None, str, bool]:
    versions, used, cap, policies, refusing = set(), 0, 0, set(), False
    for node in _nodes(connector):
        fields: dict[str, Any] = {}
        for section in ("server", "memory"):
            reply = await node.command("INFO", section)
            if isinstance(reply, dict):  # redis-py parses INFO into a dict
                fields |= {text(k): v for k, v in reply.items()}
            else:
                fields |= dict(ln.split(":", 1) for ln in text(reply).splitlines() if ":" in ln)
        versions.add(str(fields.get("valkey_version") or fields.get("redis_version") or "?"))
        used += int(fields.get("used_memory", 0))
        cap += int(fields.get("maxmemory", 0))
        status = parse_info(fields)
        policies.add(status.policy)
        refusing = refusing or status.refusing
    return ", ".join(sorted(versions)), used, cap or None, ", ".join(sorted(policies)), refusing


async def server_info(connector: AsyncConnector | AsyncClusterConnector,
                      queues: list[str] | None = None) -> ServerInfo:
    """Every queue on the server (or the ``queues`` named: QueueNotFound for an unknown one)."""
    found = []
    for name in queues if queues is not None else await discover_queues(connector):
        try:
            found.append(await queue_info(connector, name))
        except QueueNotFound:
            if queues is not None:
                raise
            # deleted between the scan and the read: not there any more
    version, used, cap, policy, refusing = await _memory(connector)
    return ServerInfo(version=version, used_memory=used, maxmemory=cap, queues=found,
                      policy=policy, refusing=refusing)
