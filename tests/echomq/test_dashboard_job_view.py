"""The dashboard's job page shows progress, a cancel asked of a running job, and a
cancelled job's state and time (issue 14 items 6 and 7), served over HTTP."""

from __future__ import annotations

import urllib.request

from echomq import Connector, Queue, generate
from echomq.ops.dashboard import DashboardOptions, create_app
from echomq.servers.server import EmbeddedValkey
from tests.dashboard_support import served


def _page(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as resp:
        assert resp.status == 200
        return str(resp.read().decode())


def test_the_job_page_shows_progress_the_cancel_ask_and_a_cancelled_state(
        own_server: EmbeddedValkey) -> None:
    conn = Connector.from_url(own_server.url)
    q = Queue(conn, "view")
    running, waiting = generate("JOB"), generate("JOB")
    q.enqueue(running, b"r")
    (lease,) = q.claim(1, lease_ms=60_000)
    q.enqueue(waiting, b"w")
    q.report_progress(lease, b"step 3 of 7")
    q.cancel([running, waiting])
    try:
        with served(create_app(own_server.url, options=DashboardOptions(read_only=True))) as site:
            page = _page(f"{site}/queues/view/jobs/{running}")
            assert "step 3 of 7" in page and "cancel asked" in page
            page = _page(f"{site}/queues/view/jobs/{waiting}")
            assert "cancelled" in page and "No such job" not in page
    finally:
        conn.close()
