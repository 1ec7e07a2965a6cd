"""The logical queue behind a name, for operators (CLI, dashboard, ``echomq info``).

A name is a sharded queue when ``emq:{name}:shards`` records a count: its shards'
sub-queues (``name#i/N``) are then shown as that one queue, never on their own.
"""

from __future__ import annotations

import re
from typing import Any

from echomq.client._async.cluster import AsyncClusterConnector
from echomq.client._async.connector import AsyncConnector
from echomq.client._async.queue import AsyncQueue
from echomq.client._async.sharded import AsyncShardedQueue
from echomq.protocol.resharding import parse_record
from echomq.protocol.sharding import ShardLayout, record_key

__all__ = ["is_shard_name", "layout_of", "open_queue", "shard_count"]

Conn = AsyncConnector | AsyncClusterConnector
_SHARD = re.compile(r"#\d+/\d+(@\d+)?(~\d+)?$")


async def shard_count(conn: Conn, name: str) -> int | None:
    """The shard count queue ``name`` records, or None for a plain queue."""
    raw: Any = await conn.command("HGET", record_key(name), "count")
    return None if raw is None else int(raw.decode() if isinstance(raw, bytes) else raw)


async def layout_of(conn: Conn, name: str) -> ShardLayout | None:
    """The layout queue ``name`` records now (its count and epoch), or None for a plain
    queue (decision 0032: a reshard makes a new epoch, with shard names of its own)."""
    rec = parse_record(name, await conn.command("HGETALL", record_key(name)))
    return None if rec is None else rec.layout


async def open_queue(conn: Conn, name: str) -> AsyncQueue | AsyncShardedQueue:
    """The queue named ``name``: sharded with its recorded layout, else plain."""
    rec = parse_record(name, await conn.command("HGETALL", record_key(name)))
    if rec is None:
        return AsyncQueue(conn, name)
    q = AsyncShardedQueue(conn, name, shards=rec.count)
    q._adopt(rec)  # its shards by the recorded epoch from the start (no write: a reader)
    return q


def is_shard_name(name: str, logical: set[str]) -> bool:
    """Whether ``name`` is a shard of one of the ``logical`` sharded queues."""
    m = _SHARD.search(name)
    return m is not None and name[: m.start()] in logical
