"""Workers register on the queues they serve, with a heartbeat, so they can be listed.

A worker's registration lives in the queue's own keys (``emq:{q}:workers``, a sorted
set of worker name to deadline on the server clock, and ``emq:{q}:workers:about``,
its self-description as JSON), so it shares the queue's hash tag and slot. The
``worker_beat`` script refreshes it every ``beat_s`` for ``ttl_s``; a worker that
dies simply stops beating, and its entry lapses (readers skip lapsed entries, the next
beat of any worker on the queue deletes them). A clean exit removes it at once.

:class:`MinuteCounts` keeps what a worker processed and failed in the last minute, in
one-second buckets: that is what ``echomq info`` sums as the queue's recent rates.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import time
from collections.abc import Callable, Sequence
from typing import Any

from echomq.client._async.cluster import AsyncClusterConnector
from echomq.client._async.connector import AsyncConnector
from echomq.core.bounds import MAX_ABOUT, MAX_TTL_MS, MAX_WORKER_NAME, check_bytes
from echomq.core.errors import InvalidArgument
from echomq.protocol import keyspace
from echomq.protocol.scripts import load

__all__ = ["MinuteCounts", "Registration", "worker_name"]

log = logging.getLogger("echomq.client.registry")


def worker_name() -> str:
    """A name unique to this process: ``host:pid:random``."""
    return f"{socket.gethostname()[:200]}:{os.getpid()}:{os.urandom(3).hex()}"


class MinuteCounts:
    """Counts of named events over the last 60 seconds, in one-second buckets."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._buckets: dict[int, dict[str, int]] = {}

    def add(self, what: str, n: int = 1) -> None:
        now = int(self._clock())
        bucket = self._buckets.setdefault(now, {})
        bucket[what] = bucket.get(what, 0) + n
        if len(self._buckets) > 64:
            self._prune(now)

    def _prune(self, now: int) -> None:
        for second in [s for s in self._buckets if s <= now - 60]:
            del self._buckets[second]

    def totals(self) -> dict[str, int]:
        now = int(self._clock())
        self._prune(now)
        out: dict[str, int] = {}
        for bucket in self._buckets.values():
            for what, n in bucket.items():
                out[what] = out.get(what, 0) + n
        return out


class Registration:
    """One worker's entry on each of its queues, kept alive by :meth:`run`."""

    def __init__(self, connector: AsyncConnector | AsyncClusterConnector, queues: Sequence[str], *,
                 name: str | None = None, beat_s: float = 2.0, ttl_s: float = 10.0,
                 about: Callable[[], dict[str, Any]] | None = None) -> None:
        if ttl_s < 2 * beat_s or beat_s <= 0:
            raise InvalidArgument("ttl_s must cover at least two beats, and beat_s be > 0")
        if ttl_s * 1000 > MAX_TTL_MS:
            raise InvalidArgument(f"ttl_s must be at most {MAX_TTL_MS // 1000} (one day)")
        if name is not None and not 1 <= len(name.encode()) <= MAX_WORKER_NAME:
            raise InvalidArgument(f"a worker's name is 1..{MAX_WORKER_NAME} bytes, not {name!r}")
        self.connector = connector
        self.queues = [keyspace.check_queue(q) for q in queues]
        self.name = name or worker_name()
        self.beat_s = beat_s
        self.ttl_s = ttl_s
        self._about = about or dict
        self._stop = asyncio.Event()

    def _keys(self, queue: str) -> list[str]:
        return [keyspace.queue_key(queue, "workers"), keyspace.queue_key(queue, "workers:about"),
                keyspace.queue_key(queue, "meta")]

    async def beat(self) -> None:
        """Register (or refresh) on every queue once."""
        # Bounded before any I/O: the script refuses more (MAX_ABOUT) from any client.
        about = check_bytes("about", json.dumps(self._about(), sort_keys=True, default=str).encode(),
                            MAX_ABOUT)
        for queue in self.queues:
            await self.connector.eval(load("worker_beat"), self._keys(queue),
                                      [self.name, int(self.ttl_s * 1000), about])

    async def run(self) -> None:
        """Beat every ``beat_s`` until :meth:`stop`; a failed beat is logged and retried."""
        while not self._stop.is_set():
            try:
                await self.beat()
            except Exception as exc:
                log.warning("%s: registration beat failed (%r)", self.name, exc)
            try:
                async with asyncio.timeout(self.beat_s):
                    await self._stop.wait()
            except TimeoutError:
                pass

    def stop(self) -> None:
        self._stop.set()

    async def remove(self) -> None:
        """Take this worker off every queue now (a clean exit)."""
        for queue in self.queues:
            await self.connector.eval(load("worker_beat"), self._keys(queue), [self.name, 0, ""])
