"""Fault scenarios with typed tasks, on one server and on the 3+3 cluster: kill -9 of the
worker mid-task, and SIGSTOP of the worker past the lease. The job runs again elsewhere,
once, and its typed result is the second worker's (tests/echomq/test_faults.py has the
same scenarios for raw handlers)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from typing import Any

import pytest

from echomq import App, Connector, Verdict, connect
from tests.echomq.tasks.typed_worker_proc import declare
from tests.echomq.test_faults import Workers, deadline_of_start, log_lines, ready, wait_until

pytestmark = pytest.mark.slow
PROC = "tests.echomq.tasks.typed_worker_proc"


@pytest.fixture
def workers(backend_url: str, qname: str) -> Iterator[Workers]:
    w = Workers(backend_url, qname)
    yield w
    w.cleanup()


@pytest.fixture
def app(backend_url: str, qname: str) -> Iterator[App]:
    conn: Connector = connect(backend_url)  # type: ignore[assignment]
    made = App(sync_connector=conn, queue=qname)
    yield made
    conn.close()


def test_kill_9_mid_task_runs_it_again_elsewhere_once(
        workers: Workers, app: App, raw: Any, qname: str) -> None:
    work: Any = declare(app)
    a = workers.spawn(PROC, "--beat", "100", "--lease", "1000")
    ready(raw, qname, a)
    handle = work.admit_sync(7, 60.0)
    assert handle.verdict is Verdict.ENQUEUED
    wait_until(lambda: ["start", handle.id, "1", str(a.pid)] in log_lines(raw, qname))
    b = workers.spawn(PROC, "--beat", "100", "--lease", "1000")
    ready(raw, qname, b)
    a.kill()
    a.wait()
    held_until = int(raw.zscore(f"emq:{{{qname}}}:active", handle.id))
    assert handle.result(timeout=30) == f"7 by {b.pid}"  # decoded to the annotated str
    assert deadline_of_start(raw, qname, handle.id, 2) - 1000 >= held_until  # not before a's lease ran out
    assert [x for x in log_lines(raw, qname) if x[0] == "start"] == [
        ["start", handle.id, "1", str(a.pid)], ["start", handle.id, "2", str(b.pid)]]
    stats = workers.stop(b)
    assert (stats["completed"], stats["lost"]) == (1, 0)


def test_sigstop_past_the_lease_loses_it_and_the_other_worker_finishes(
        workers: Workers, app: App, raw: Any, qname: str) -> None:
    work: Any = declare(app)
    a = workers.spawn(PROC, "--beat", "100", "--lease", "600")
    ready(raw, qname, a)
    handle = work.admit_sync(8, 60.0)
    wait_until(lambda: ["start", handle.id, "1", str(a.pid)] in log_lines(raw, qname))
    a.send_signal(signal.SIGSTOP)
    b = workers.spawn(PROC, "--beat", "100", "--lease", "600")
    assert handle.result(timeout=30) == f"8 by {b.pid}"
    stats_a, stats_b = workers.stop(a), workers.stop(b)  # a resumed: its heartbeat is refused
    assert stats_a["lost"] == 1
    assert stats_a["completed"] == stats_a["stale"] == stats_a["retried"] == 0
    assert stats_b["completed"] == 1
    row = raw.hgetall(f"emq:{{{qname}}}:job:{handle.id}")
    assert row[b"state"] == b"done" and row[b"attempts"] == b"2"
