# Generated from echomq/_async/memory.py by scripts/unasync_gen.py. Do not edit.
"""Read a server's memory against its limit (``INFO memory``) through a conn.

On a cluster the reading comes from the primary that serves the queue's slot (the one
that refuses or admits its jobs), or, without a queue, from the primary closest to its
limit. See :class:`echomq.memory.MemoryStatus`.
"""

from __future__ import annotations

from echomq import keyspace
from echomq._sync.cluster import ClusterConnector
from echomq._sync.connector import Connector
from echomq.memory import MemoryStatus, parse_info

__all__ = ["memory_status"]


def memory_status(conn: Connector | ClusterConnector, queue: str | None = None,
                        ) -> MemoryStatus:
    """Used memory, ``maxmemory`` and policy of the server that holds ``queue``."""
    if isinstance(conn, ClusterConnector):
        if queue is not None:
            addrs = [conn.node_for_key(keyspace.queue_key(queue, "pending"))]
        else:
            if not conn.primaries:
                conn.refresh()
            addrs = conn.primaries
        readings = []
        for host, port in addrs:
            info = conn.node((host, port)).command("INFO", "memory")
            readings.append(parse_info(info, node=f"{host}:{port}"))
        return max(readings, key=lambda m: (m.fraction or 0.0, m.used))
    return parse_info(conn.command("INFO", "memory"))
