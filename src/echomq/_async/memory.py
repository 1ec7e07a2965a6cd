"""Read a server's memory against its limit (``INFO memory``) through a conn.

On a cluster the reading comes from the primary that serves the queue's slot (the one
that refuses or admits its jobs), or, without a queue, from the primary closest to its
limit. See :class:`echomq.memory.MemoryStatus`.
"""

from __future__ import annotations

from echomq import keyspace
from echomq._async.cluster import AsyncClusterConnector
from echomq._async.connector import AsyncConnector
from echomq.memory import MemoryStatus, parse_info

__all__ = ["memory_status"]


async def memory_status(conn: AsyncConnector | AsyncClusterConnector, queue: str | None = None,
                        ) -> MemoryStatus:
    """Used memory, ``maxmemory`` and policy of the server that holds ``queue``."""
    if isinstance(conn, AsyncClusterConnector):
        if queue is not None:
            addrs = [await conn.node_for_key(keyspace.queue_key(queue, "pending"))]
        else:
            if not conn.primaries:
                await conn.refresh()
            addrs = conn.primaries
        readings = []
        for host, port in addrs:
            info = await conn.node((host, port)).command("INFO", "memory")
            readings.append(parse_info(info, node=f"{host}:{port}"))
        return max(readings, key=lambda m: (m.fraction or 0.0, m.used))
    return parse_info(await conn.command("INFO", "memory"))
