"""``GET /metrics``: the sampled queue depths and latencies in Prometheus' text format.

Read from the dashboard's last sample of each queue (no I/O at scrape time), so a
scrape costs nothing on the server and is at most one sampling interval old.
Names follow Prometheus conventions: base units, a ``queue`` and a ``state`` label,
never a job id.
"""

from __future__ import annotations

from collections.abc import Iterator

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from echomq.dashboard.app import state
from echomq.dashboard.history import History

__all__ = ["QueueCollector", "endpoint"]

_STATES = ("pending", "active", "delayed", "done", "dead")


class QueueCollector(Collector):
    """Gauges from the newest sample of each queue in ``history``."""

    def __init__(self, history: History) -> None:
        self.history = history

    def collect(self) -> Iterator[GaugeMetricFamily]:
        jobs = GaugeMetricFamily("echomq_queue_jobs", "Jobs in the queue by state (sampled).",
                                 labels=["queue", "state"])
        latency = GaugeMetricFamily(
            "echomq_queue_latency_seconds",
            "Admission-to-completion time of the jobs completed in the last sampling window.",
            labels=["queue", "quantile"])
        rate = GaugeMetricFamily("echomq_queue_completed_per_second",
                                 "Jobs completed per second over the last sampling window.",
                                 labels=["queue"])
        for queue in sorted(self.history.queues()):
            ring = self.history.samples(queue)
            if not ring:
                continue
            last = ring[-1]
            for s in _STATES:
                jobs.add_metric([queue, s], getattr(last, s))
            for q, v in (("0.5", last.p50_ms), ("0.95", last.p95_ms)):
                if v is not None:
                    latency.add_metric([queue, q], v / 1000)
            rate.add_metric([queue], last.completed_per_s)
        yield jobs
        yield latency
        yield rate


async def endpoint(request: web.Request) -> web.Response:
    st = state(request)
    registry = CollectorRegistry(auto_describe=False)
    if st.history is not None:
        registry.register(QueueCollector(st.history))
    body = generate_latest(registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})
