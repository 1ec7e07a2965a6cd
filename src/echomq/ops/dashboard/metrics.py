"""``GET /metrics``: the queues in Prometheus' text format.

The families are :class:`echomq.ops.metrics.QueueMetrics` (the same names a worker
serves: ``echomq_jobs`` by state, oldest pending age, overdue leases, workers),
refreshed from the server at scrape time, plus two gauges from the dashboard's own
samples: admission-to-completion latency quantiles and completions per second over
the last sampling window. Labels are ``queue`` (and ``state``/``quantile``), never a
job id.
"""

from __future__ import annotations

from collections.abc import Iterator

from aiohttp import web
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from echomq.ops.dashboard.history import History
from echomq.ops.dashboard.state import state
from echomq.ops.metrics import CONTENT_TYPE, QueueMetrics

__all__ = ["SampledCollector", "endpoint", "queue_metrics"]


class SampledCollector(Collector):
    """Gauges from the newest sample of each queue in ``history`` (no I/O at collect)."""

    def __init__(self, history: History) -> None:
        self.history = history

    def collect(self) -> Iterator[GaugeMetricFamily]:
        latency = GaugeMetricFamily(
            "echomq_latency_seconds",
            "Admission-to-completion time of the jobs completed in the last sampling window",
            labels=["queue", "quantile"])
        rate = GaugeMetricFamily("echomq_completed_per_second",
                                 "Jobs completed per second over the last sampling window",
                                 labels=["queue"])
        for queue in sorted(self.history.queues()):
            ring = self.history.samples(queue)
            if not ring:
                continue
            last = ring[-1]
            for q, v in (("0.5", last.p50_ms), ("0.95", last.p95_ms)):
                if v is not None:
                    latency.add_metric([queue, q], v / 1000)
            rate.add_metric([queue], last.completed_per_s)
        yield latency
        yield rate


def queue_metrics(history: History) -> QueueMetrics:
    """The dashboard's metric families: the worker's queue gauges and the sampled ones."""
    metrics = QueueMetrics()
    metrics.registry.register(SampledCollector(history))
    return metrics


async def endpoint(request: web.Request) -> web.Response:
    st = state(request)
    if st.metrics is None:
        raise web.HTTPServiceUnavailable(text="starting")
    await st.metrics.refresh(st.connector, await st.queues())
    return web.Response(body=st.metrics.exposition(), headers={"Content-Type": CONTENT_TYPE})
