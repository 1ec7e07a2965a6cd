"""Throughput, latency and depth over time: a ring buffer sampled by the dashboard process.

Nothing here counts on the client's side. Every ``interval_s`` the sampler reads, per
queue, from the server: the counts by state, and the jobs that entered ``done`` and
``dead`` since the previous sample. Those sets are scored by the server time a job
entered them, so "finished since the last sample" is one ``ZCOUNT`` over the score
range, and a finished job's latency is its done time minus the admission time its
branded id carries (:func:`echomq.core.ids.timestamp_ms`). The numbers are exact while the
queue keeps finished rows (``keep_done_ms`` > 0; with 0 a finished row is deleted at
completion and the done set stays empty). The buffer keeps ``length`` samples per
queue (120 × 5 s = the last 10 minutes) and is lost when the dashboard stops.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import math
from dataclasses import dataclass
from typing import Any

from echomq.client._async.cluster import AsyncClusterConnector
from echomq.client._async.connector import AsyncConnector
from echomq.core import ids
from echomq.core.errors import BackPressure, InvalidArgument, ServerError
from echomq.protocol import keyspace

__all__ = ["History", "Sample", "percentile"]

log = logging.getLogger("echomq.ops.dashboard")

LATENCY_SAMPLE = 500  # finished jobs read per queue and tick for the latency percentiles


@dataclass(frozen=True, slots=True)
class Sample:
    """One queue at one tick (server clock)."""

    at_ms: int
    pending: int
    active: int
    delayed: int
    done: int
    dead: int
    completed: int  # entered done since the previous sample
    died: int  # entered dead since the previous sample
    window_s: float
    p50_ms: float | None  # admission to completion, of the jobs completed in the window
    p95_ms: float | None

    @property
    def completed_per_s(self) -> float:
        return self.completed / self.window_s if self.window_s else 0.0


def percentile(values: list[float], q: float) -> float | None:
    """The nearest-rank ``q`` percentile (0 < q <= 100) of ``values``, None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def _int(value: Any) -> int:
    return int(float(value))


class History:
    """The last ``length`` samples of each queue, taken every ``interval_s``."""

    def __init__(self, connector: AsyncConnector | AsyncClusterConnector, *, interval_s: float = 5.0,
                 length: int = 120) -> None:
        if interval_s <= 0 or length < 2:
            raise InvalidArgument("interval_s must be > 0 and length >= 2")
        self.connector = connector
        self.interval_s = interval_s
        self.length = length
        self._samples: dict[str, collections.deque[Sample]] = {}
        self._stopped = False
        self._unreadable: set[str] = set()  # queues whose last sample failed (warned once)

    def stop(self) -> None:
        """End :meth:`run` after the queue it is sampling now (a cancellation alone was
        seen lost inside a connector call, leaving a dashboard with many queues unable to
        stop on Ctrl-C)."""
        self._stopped = True

    def queues(self) -> list[str]:
        return list(self._samples)

    def samples(self, queue: str) -> list[Sample]:
        return list(self._samples.get(queue, ()))

    @property
    def span_s(self) -> float:
        return self.interval_s * (self.length - 1)

    async def sample(self, queues: list[str]) -> None:
        """Take one sample of each of ``queues`` now."""
        for name in queues:
            if self._stopped:
                return
            ring = self._samples.setdefault(name, collections.deque(maxlen=self.length))
            try:
                ring.append(await self._one(name, ring[-1] if ring else None))
            except ServerError as exc:  # a damaged queue (a foreign key of the wrong type)
                if isinstance(exc, BackPressure):
                    raise  # the whole server: the tick fails and is tried again
                if name not in self._unreadable:  # once per queue, not once per tick
                    log.warning("dashboard: cannot sample queue %s (%s); sampling the others", name, exc)
                self._unreadable.add(name)
                continue
            self._unreadable.discard(name)
        for gone in set(self._samples) - set(queues):
            del self._samples[gone]

    async def _one(self, name: str, last: Sample | None) -> Sample:
        k = {t: keyspace.queue_key(name, t) for t in ("pending", "active", "delayed", "done", "dead")}
        c = self.connector
        now = await c.server_time_ms()
        since = last.at_ms if last else now - int(self.interval_s * 1000)
        depth = [int(await c.command("ZCARD", k[t])) for t in ("pending", "active", "delayed", "done",
                                                                "dead")]
        completed = int(await c.command("ZCOUNT", k["done"], f"({since}", now))
        died = int(await c.command("ZCOUNT", k["dead"], f"({since}", now))
        recent = await c.command("ZRANGE", k["done"], now, f"({since}", "BYSCORE", "REV",
                                 "LIMIT", 0, LATENCY_SAMPLE, "WITHSCORES")
        lat = []
        for job_id, score in _pairs(recent):
            text = job_id.decode() if isinstance(job_id, bytes) else str(job_id)
            if ids.valid(text):
                lat.append(max(0.0, float(score) - ids.timestamp_ms(text)))
        return Sample(at_ms=now, pending=depth[0], active=depth[1], delayed=depth[2], done=depth[3],
                      dead=depth[4],
                      completed=completed, died=died, window_s=max((now - since) / 1000, 0.001),
                      p50_ms=percentile(lat, 50), p95_ms=percentile(lat, 95))

    async def run(self, queues: Any) -> None:
        """Sample every ``interval_s`` until cancelled; ``queues()`` names the queues each
        time. A failed tick is logged and the next one tried."""
        while not self._stopped:
            try:
                await self.sample(await queues())
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("dashboard: sampling failed (%r); trying again", exc)
            await asyncio.sleep(self.interval_s)


def _pairs(reply: Any) -> list[tuple[Any, Any]]:
    """WITHSCORES replies come as pairs or as a flat list depending on the protocol."""
    if reply and isinstance(reply[0], list | tuple):
        return [(a, b) for a, b in reply]
    return list(zip(reply[::2], reply[1::2], strict=True))
