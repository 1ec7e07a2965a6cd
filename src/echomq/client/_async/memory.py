"""Read a server's memory against its limit (``INFO memory``) through a conn.

On a cluster the reading comes from the primary that serves the queue's slot (the one
that refuses or admits its jobs), or, without a queue, from the primary closest to its
limit. See :class:`echomq.core.memory.MemoryStatus`. :func:`typed_refusals` turns the
admission replies a server refused for back-pressure into their typed errors.
"""

from __future__ import annotations

import contextlib

from echomq.client._async.cluster import AsyncClusterConnector
from echomq.client._async.seam import Reply, ScriptConnector
from echomq.client.replies import reply_code
from echomq.core.errors import BackPressure, ServerBusy, ServerFull
from echomq.core.memory import MemoryStatus, human, parse_info
from echomq.protocol import keyspace

__all__ = ["memory_status", "typed_refusals"]


async def memory_status(conn: ScriptConnector, queue: str | None = None,
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


def _full(queue: str, status: MemoryStatus | None) -> str:
    where = f" on {status.node}" if status is not None and status.node else ""
    figures = (f"maxmemory {human(status.maxmemory)}, policy {status.policy}, used "
               f"{human(status.counted)}" if status is not None else "maxmemory, figures unread")
    return (f"queue {queue!r}: admission refused, the server{where} is at its memory limit "
            f"({figures}); nothing was written. Retry later: consumers drain the backlog and "
            "admissions resume by themselves (docs/reliability.md)")


async def typed_refusals(conn: ScriptConnector, queue: str,
                         replies: list[Reply]) -> list[Reply]:
    """Admission replies with each back-pressure refusal as its typed error, in place.

    ``OOM`` becomes :class:`ServerFull` whose message names the server's ``maxmemory``
    and policy (one ``INFO memory`` read per batch), ``BUSY`` :class:`ServerBusy`; every
    other reply is returned as it is.
    """
    codes = [reply_code(r) if isinstance(r, Exception) else None for r in replies]
    if "OOM" not in codes and "BUSY" not in codes:
        return replies
    status: MemoryStatus | None = None
    if "OOM" in codes:
        with contextlib.suppress(Exception):  # the figures are a courtesy; the type is not
            status = await memory_status(conn, queue)
    out: list[Reply] = []
    for reply, code in zip(replies, codes, strict=True):
        typed: BackPressure | None = None
        if code == "OOM":
            typed = ServerFull(_full(queue, status))
        elif code == "BUSY":
            typed = ServerBusy(f"queue {queue!r}: admission refused, a long script holds the "
                               "server (BUSY, busy-reply-threshold); nothing was written. "
                               "Retry later")
        if typed is not None:
            typed.code = code  # type: ignore[attr-defined]
            typed.__cause__ = reply if isinstance(reply, BaseException) else None
        out.append(typed if typed is not None else reply)
    return out
