"""Prometheus metrics (the ``metrics`` extra: ``pip install echomq[metrics]``).

Names follow Prometheus conventions: counters end in ``_total``, durations are
``_seconds`` histograms in base units, labels are few and bounded (``queue``,
``state``, ``outcome``), never a job id.

=========================================  =========  ==========================================
name                                       type       what
=========================================  =========  ==========================================
``echomq_jobs``                            gauge      jobs in the queue by ``state`` (server;
                                                      ``expired``: never started by deadline)
``echomq_oldest_pending_age_seconds``      gauge      age of the oldest pending job (server)
``echomq_leases_overdue``                  gauge      leases past their deadline, not yet reaped
``echomq_workers``                         gauge      workers registered on the queue (server)
``echomq_flows_waiting``                   gauge      flow parents waiting for children (server)
``echomq_flow_children_held``              gauge      flow children held, not yet started (server)
``echomq_flow_notices``                    gauge      children's ends not yet relayed (server)
``echomq_flow_parents_released``           gauge      parents of the queue released, ever (server)
``echomq_flow_parents_failed``             gauge      parents of the queue failed by policy (server)
``echomq_flows_released_total``            counter    parents released by this process's relay
``echomq_flows_failed_total``              counter    parents failed by policy by its relay
``echomq_jobs_admitted_total``             counter    admissions ENQUEUED by this process
``echomq_jobs_claimed_total``              counter    attempts claimed by this process
``echomq_jobs_completed_total``            counter    attempts completed
``echomq_jobs_retried_total``              counter    failed attempts scheduled again
``echomq_jobs_dead_total``                 counter    failed attempts that made the job dead
``echomq_jobs_deferred_total``             counter    attempts deferred (no failure counted)
``echomq_jobs_handed_back_total``          counter    in flight at shutdown, handed back
``echomq_jobs_reaped_total``               counter    expired leases this process reaped
``echomq_leases_lost_total``               counter    this process's leases found expired
``echomq_handler_duration_seconds``        histogram  handler run time, by ``outcome``
``echomq_claim_to_start_seconds``          histogram  from the claim (server clock) to the start
=========================================  =========  ==========================================

The gauges are read from the server (:func:`echomq.client.info.queue_info`) every
``refresh_s``; the counters are this process's own (a scrape of every worker sums to
the whole). :class:`QueueMetrics` is the collector set for any process (the dashboard
serves it too); :class:`WorkerMetrics` adds a worker's consumers and an HTTP endpoint.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

try:
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
    from prometheus_client.exposition import generate_latest
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("metrics need the extra: pip install 'echomq[metrics]'") from exc

from echomq.client.info import queue_info
from echomq.core.errors import QueueNotFound
from echomq.core.model import Verdict
from echomq.protocol.keyspace import QueueKeys

__all__ = ["CONTENT_TYPE", "QueueMetrics", "WorkerMetrics"]

log = logging.getLogger("echomq.ops.metrics")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_STATES = ("pending", "active", "delayed", "done", "dead", "expired")
_STAT_COUNTERS = ("claimed", "completed", "retried", "dead", "deferred", "handed_back", "reaped", "lost",
                  "flows_released", "flows_failed")
_DURATIONS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


class QueueMetrics:
    """The metric families, in a registry of their own (several may live in one process)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = self.registry = registry or CollectorRegistry()
        self.jobs = Gauge("echomq_jobs", "Jobs in the queue by state", ["queue", "state"], registry=r)
        self.oldest = Gauge("echomq_oldest_pending_age_seconds",
                            "Seconds since the admission of the oldest pending job", ["queue"], registry=r)
        self.overdue = Gauge("echomq_leases_overdue",
                             "Active jobs whose lease expired and that wait for reap", ["queue"], registry=r)
        self.workers = Gauge("echomq_workers", "Workers registered on the queue", ["queue"], registry=r)
        self.admitted = Counter("echomq_jobs_admitted", "Admissions this process made that were ENQUEUED",
                                ["queue"], registry=r)
        self.counters = {
            "claimed": Counter("echomq_jobs_claimed", "Attempts claimed", ["queue"], registry=r),
            "completed": Counter("echomq_jobs_completed", "Attempts completed", ["queue"], registry=r),
            "retried": Counter("echomq_jobs_retried", "Failed attempts scheduled to run again",
                               ["queue"], registry=r),
            "dead": Counter("echomq_jobs_dead", "Failed attempts that made the job dead", ["queue"],
                            registry=r),
            "deferred": Counter("echomq_jobs_deferred", "Attempts deferred without a failure", ["queue"],
                                registry=r),
            "handed_back": Counter("echomq_jobs_handed_back",
                                   "Attempts in flight at shutdown, handed back to pending", ["queue"],
                                   registry=r),
            "reaped": Counter("echomq_jobs_reaped", "Expired leases re-exposed by this process's upkeep",
                              ["queue"], registry=r),
            "lost": Counter("echomq_leases_lost", "Leases of this process found expired (lease expirations)",
                            ["queue"], registry=r),
            "flows_released": Counter("echomq_flows_released",
                                      "Flow parents this process's relay released (the queue is the "
                                      "children's, whose notices it relayed; a parent released by "
                                      "its same-queue child's own script is not counted: decision "
                                      "0041)", ["queue"], registry=r),
            "flows_failed": Counter("echomq_flows_failed",
                                    "Flow parents this process's relay failed by their 'fail' policy",
                                    ["queue"], registry=r),
        }
        self.flows_waiting = Gauge("echomq_flows_waiting", "Flow parents waiting for their children",
                                   ["queue"], registry=r)
        self.parents_released = Gauge("echomq_flow_parents_released",
                                      "Flow parents of this queue released, ever, by a relay or by "
                                      "their same-queue child's own script (the server's count)",
                                      ["queue"], registry=r)
        self.parents_failed = Gauge("echomq_flow_parents_failed",
                                    "Flow parents of this queue failed by their 'fail' policy, ever "
                                    "(the server's count)", ["queue"], registry=r)
        self.flow_held = Gauge("echomq_flow_children_held",
                               "Flow children held (admitted, their flow not started yet)", ["queue"],
                               registry=r)
        self.flow_notices = Gauge("echomq_flow_notices",
                                  "Ends of flow children recorded here, not yet relayed to their parent",
                                  ["queue"], registry=r)
        self.duration = Histogram("echomq_handler_duration_seconds", "Handler run time",
                                  ["queue", "outcome"], buckets=_DURATIONS, registry=r)
        self.claim_to_start = Histogram("echomq_claim_to_start_seconds",
                                        "From the claim on the server clock to the handler's start",
                                        ["queue"], buckets=_DURATIONS, registry=r)

    def count_admissions(self, queue: str, verdicts: Iterable[Any]) -> None:
        """Count the ENQUEUED verdicts of an admission call on ``queue``."""
        n = sum(1 for v in verdicts if v is Verdict.ENQUEUED)
        if n:
            self.admitted.labels(queue=queue).inc(n)

    async def refresh(self, connector: Any, queues: Iterable[str]) -> None:
        """Read the gauges of ``queues`` from the server."""
        for name in queues:
            try:
                info = await queue_info(connector, name)
            except QueueNotFound:
                continue
            for state in _STATES:
                self.jobs.labels(queue=name, state=state).set(getattr(info.counts, state))
            self.oldest.labels(queue=name).set(info.oldest_pending_age_s or 0.0)
            self.overdue.labels(queue=name).set(info.overdue_leases)
            self.workers.labels(queue=name).set(len(info.workers))
            k = QueueKeys.of(name)
            self.flows_waiting.labels(queue=name).set(int(await connector.command("ZCARD", k.waiting)))
            self.flow_held.labels(queue=name).set(int(await connector.command("ZCARD", k.held)))
            self.flow_notices.labels(queue=name).set(int(await connector.command("HLEN", k.finished)))
            released, failed = await connector.command("HMGET", k.flows, "released", "failed")
            self.parents_released.labels(queue=name).set(int(released or 0))
            self.parents_failed.labels(queue=name).set(int(failed or 0))

    def exposition(self) -> bytes:
        """The registry in the text format (for an HTTP handler of one's own)."""
        return generate_latest(self.registry)


class WorkerMetrics(QueueMetrics):
    """A worker's metrics and its ``/metrics`` endpoint (a thread of prometheus-client)."""

    def __init__(self, worker: Any, *, port: int = 0, host: str = "127.0.0.1", refresh_s: float = 5.0,
                 registry: CollectorRegistry | None = None) -> None:
        super().__init__(registry)
        self.worker = worker
        self.refresh_s = refresh_s
        self._seen: dict[tuple[str, str], int] = {}
        self._server, self._thread = start_http_server(port, addr=host, registry=self.registry)
        self.port = int(self._server.server_port)
        self.url = f"http://{host}:{self.port}/metrics"
        log.info("metrics on %s", self.url)

    def started(self, queue: str, claim_to_start_s: float) -> None:
        self.claim_to_start.labels(queue=queue).observe(claim_to_start_s)

    def handled(self, queue: str, seconds: float, outcome: str) -> None:
        self.duration.labels(queue=queue, outcome=outcome).observe(seconds)

    def sync_counters(self) -> None:
        """Move the consumers' counts into the counters (by their growth since last time)."""
        for queue, consumer in self.worker.consumers.items():
            for stat in _STAT_COUNTERS:
                now = int(getattr(consumer.stats, stat))
                grew = now - self._seen.get((queue, stat), 0)
                if grew > 0:
                    self.counters[stat].labels(queue=queue).inc(grew)
                self._seen[(queue, stat)] = now

    async def refresh_forever(self) -> None:
        connector = self.worker._connector
        while True:
            self.sync_counters()
            try:
                await self.refresh(connector, list(self.worker.consumers))
            except Exception as exc:
                log.warning("metrics refresh failed (%r)", exc)
            await asyncio.sleep(self.refresh_s)

    def close(self) -> None:
        self.sync_counters()
        self._server.shutdown()
        self._server.server_close()
