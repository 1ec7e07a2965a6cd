"""Operator transitions on named jobs (requeue, purge, cancel) on both topologies, and the
dashboard's pure pieces (escaping, payload preview, charts, percentiles)."""

from __future__ import annotations

import json

import pytest
import redis

from echomq import AsyncQueue, CancelOutcome, InvalidJobId, QueueOptions, generate
from echomq.ops.dashboard.charts import Series, line_chart
from echomq.ops.dashboard.history import percentile
from echomq.ops.dashboard.render import duration, payload_preview
from tests.conftest import keys_of
from tests.echomq.invariants import assert_consistent


async def _dead(queue: AsyncQueue, n: int) -> list[str]:
    q = AsyncQueue(queue.connector, queue.name, options=QueueOptions(max_attempts=1))
    ids = [generate("JOB") for _ in range(n)]
    for i in ids:
        await q.enqueue(i, b"x")
    for lease in await q.claim(n, lease_ms=60_000):
        await q.retry(lease, delay_ms=0, error="E: boom")
    return ids


async def test_requeue_moves_only_the_named_dead_jobs(queue: AsyncQueue, raw: redis.Redis) -> None:
    dead = await _dead(queue, 3)
    assert await queue.requeue([dead[0], dead[2]]) == 2
    assert (await queue.stats()).dead == 1 and (await queue.stats()).pending == 2
    row = await queue.job(dead[0])
    assert row is not None and row["state"] == b"pending" and row["failures"] == b"0"
    assert await queue.requeue([dead[0]]) == 0  # no longer dead: skipped, nothing changed
    assert assert_consistent(raw, queue.name) == {dead[0]: "pending", dead[1]: "dead", dead[2]: "pending"}


async def test_purge_deletes_only_named_jobs_of_that_state(queue: AsyncQueue, raw: redis.Redis) -> None:
    dead = await _dead(queue, 2)
    waiting = generate("JOB")
    await queue.enqueue(waiting, b"y")
    assert await queue.purge("dead", [dead[0], waiting]) == 1
    assert await queue.job(dead[0]) is None and await queue.job(waiting) is not None
    assert f"emq:{{{queue.name}}}:job:{dead[0]}" not in keys_of(raw, queue.name)
    with pytest.raises(ValueError, match="done or dead"):
        await queue.purge("pending", [waiting])
    assert assert_consistent(raw, queue.name) == {dead[1]: "dead", waiting: "pending"}


async def test_cancel_ends_waiting_jobs_cancelled_and_frees_a_held_serial_lane(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    first, second, later, running = (generate("JOB") for _ in range(4))
    await queue.admit(first, b"1", lane="p1", serial=True)
    await queue.admit(second, b"2", lane="p1", serial=True)
    await queue.admit(later, b"3", delay_ms=3_600_000)
    await queue.enqueue(running, b"4")
    leases = {x.id: x for x in await queue.claim(3, lease_ms=60_000)}
    assert set(leases) == {running, first}  # second waits behind its serial lane
    # first fails and comes back to pending still holding its serial lane
    await queue.retry(leases[first], delay_ms=0, error="E: again")
    assert await queue.cancel([first, later, running]) == [
        CancelOutcome.CANCELLED, CancelOutcome.CANCELLED, CancelOutcome.ASKED]
    for jid in (first, later):  # kept as cancelled rows in the done set, payload dropped
        row = await queue.job(jid) or {}
        assert row["state"] == b"cancelled" and b"payload" not in row
    assert (await queue.job(running) or {})["state"] == b"active"  # asked to stop, still running
    assert assert_consistent(raw, queue.name) == {running: "active", second: "pending",
                                                  first: "done", later: "done"}
    # the lane is free: its next job can be claimed
    claimed = [x.id for x in await queue.claim(5, lease_ms=60_000)]
    assert second in claimed


async def test_named_actions_refuse_bad_ids_before_any_io(queue: AsyncQueue) -> None:
    with pytest.raises(InvalidJobId):
        await queue.requeue(["not-an-id"])
    with pytest.raises(ValueError, match="job ids"):
        await queue.cancel([])
    with pytest.raises(ValueError, match="job ids"):
        await queue.cancel([generate("JOB") for _ in range(queue.options.batch + 1)])


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
