"""The dashboard's pure pieces (escaping, payload preview, charts, percentiles) and its
reads on both topologies. The operator transitions its buttons run (requeue, purge,
cancel on named jobs) are tested on both APIs in tests/echomq/_async/test_dead_jobs.py."""

from __future__ import annotations

import json

import redis

from echomq import AsyncQueue, generate
from echomq.ops.dashboard.charts import Series, line_chart
from echomq.ops.dashboard.history import percentile
from echomq.ops.dashboard.render import duration, payload_preview


def test_payload_preview_escapes_pretty_prints_and_dumps_bytes() -> None:
    kind, out = payload_preview(json.dumps({"a": "<b>"}).encode())
    assert kind == "json" and "&lt;b&gt;" in out and "<b>" not in out
    kind, out = payload_preview(b"<script>x</script>")
    assert kind == "text" and "<script>" not in out
    kind, out = payload_preview(b"\x00\xff<")
    assert kind == "binary" and "00 ff 3c" in out and "&lt;" not in out.split("  ")[0]
    kind, out = payload_preview(b"a" * 70_000)
    assert kind == "text" and "showing the first 65,536 of 70,000 bytes" in out


def test_chart_draws_series_and_marks_gaps() -> None:
    svg = line_chart("t<", [Series("q&", [1, 2, None, 4])], unit="ms", span_s=60, slots=10)
    assert svg.startswith("<svg") and "t&lt;" in svg and "q&amp;" in svg
    assert svg.count("<polyline") == 1 and 'r="2"' in svg  # a line, then a lone point after the gap


def test_percentile_and_duration() -> None:
    assert percentile([], 50) is None
    assert percentile([5, 1, 3], 50) == 3 and percentile(list(range(1, 101)), 95) == 95
    assert [duration(x) for x in (0.25, 5, 75, 7300, 90000)] == [
        "250 ms", "5.0 s", "1 min 15 s", "2 h 1 min", "1 d 1 h"]


async def test_the_dashboards_reads_on_this_topology(queue: AsyncQueue) -> None:
    """discover, summary, lanes, job_detail and one History sample, on both topologies."""
    from echomq.ops.dashboard import data
    from echomq.ops.dashboard.history import History

    conn = queue.connector
    history = History(conn, interval_s=60)
    await history.sample([queue.name])  # before any job: a baseline sample
    ids = [generate("JOB") for _ in range(4)]
    for i in ids[:3]:
        await queue.enqueue(i, b"{}")
    await queue.admit(ids[3], b"{}", lane="L", serial=True)
    leases = await queue.claim(2, lease_ms=60_000)
    await queue.complete_many(leases)
    assert queue.name in await data.discover(conn)
    s = await data.summary(conn, queue.name)
    assert (s.counts.pending, s.counts.done) == (2, 2)
    assert s.oldest_pending_age_s is not None and s.oldest_pending_age_s < 60
    lanes, waiting, complete = await data.lanes(conn, queue.name)
    assert [(x.name, x.backlog) for x in lanes] == [("L", 1)] and waiting == 1 and complete
    detail = await data.job_detail(conn, queue.name, leases[0].id)
    assert detail is not None and detail.state == "done" and detail.score is not None
    await history.sample([queue.name])
    last = history.samples(queue.name)[-1]
    assert (last.pending, last.done, last.completed) == (2, 2, 2)
    assert last.p50_ms is not None and 0 <= last.p50_ms < 60_000


async def test_one_damaged_queue_is_one_flagged_row_and_the_others_still_show(
        queue: AsyncQueue, raw: redis.Redis, backend_url: str) -> None:
    """A key of the wrong type in one queue (a foreign client's write) used to make the whole
    overview a 503 page and every sampling tick fail: now that queue's row says what is wrong
    and every other queue is shown and sampled."""
    import asyncio
    import urllib.request

    from echomq.ops.dashboard import DashboardOptions, create_app
    from echomq.ops.dashboard.history import History
    from tests.dashboard_support import served

    damaged = AsyncQueue(queue.connector, queue.name + "-damaged")
    await queue.enqueue(generate("JOB"), b"{}")
    await damaged.enqueue(generate("JOB"), b"{}")
    raw.delete(damaged.keys["done"])
    raw.set(damaged.keys["done"], "not a sorted set")
    try:
        history = History(queue.connector, interval_s=60)
        await history.sample([damaged.name, queue.name])
        assert history.samples(queue.name)[-1].pending == 1 and history.samples(damaged.name) == []

        def get(url: str) -> tuple[int, str]:
            with urllib.request.urlopen(url, timeout=20) as reply:
                return reply.status, reply.read().decode()

        with served(create_app(backend_url, options=DashboardOptions(refresh_s=0))) as url:
            status, page = await asyncio.to_thread(get, url + "/")
        assert status == 200
        assert f">{damaged.name}</a>" in page and "unreadable: ServerError: WRONGTYPE" in page
        assert f">{queue.name}</a>" in page
    finally:
        raw.delete(damaged.keys["done"])
