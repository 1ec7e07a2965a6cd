"""Lanes: ``enqueue(conn, "cm", player, job, payload)`` admits a job on a lane.

A lane is a key inside a queue (the game uses one per player). Claims serve lanes
fairly: each lane's jobs get start tags ``max(vtime, the lane's last tag) + 1``, so
backlogged lanes are served round-robin, and one flooding lane cannot starve the
others. ``serial=True`` holds the lane to one job in flight, so its jobs run in order.

:func:`enqueue` is another spelling of :meth:`echomq.AsyncQueue.admit` with a lane, with
the same defaults (``serial=False``): there is one admission verb.
"""

from __future__ import annotations

from echomq.client._async.queue import AsyncQueue
from echomq.client._async.seam import ScriptConnector
from echomq.core.model import Verdict

__all__ = ["enqueue"]


async def enqueue(
    conn: ScriptConnector, queue: str, lane: str, job_id: str,
    payload: bytes, *, serial: bool = False,
) -> Verdict:
    """``AsyncQueue(conn, queue).admit(job_id, payload, lane=lane, serial=serial)``."""
    return await AsyncQueue(conn, queue).admit(job_id, payload, lane=lane, serial=serial)
