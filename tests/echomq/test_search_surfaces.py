"""Search where an operator meets it: ``echomq search`` (a process, as an operator runs it)
and the dashboard's search page (over HTTP), on a real server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from echomq import Connector, Queue, QueueOptions, generate
from echomq.ops.dashboard import DashboardOptions, create_app
from tests.dashboard_support import served

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def jobs(valkey_url: str) -> dict[str, list[str]]:
    """A queue ``srch-<pid>``: 12 pending (3 on lane "vip"), 2 dead of a ValueError."""
    conn = Connector.from_url(valkey_url)
    q = Queue(conn, f"srch-{os.getpid()}", options=QueueOptions(max_attempts=1))
    try:
        dead = [generate("JOB") for _ in range(2)]
        q.enqueue_many([(i, b"x") for i in dead])
        for lease in q.claim(2, lease_ms=60_000):
            q.retry(lease, delay_ms=0, error="ValueError: card declined\nTraceback ...")
        plain = [generate("JOB") for _ in range(9)]
        q.enqueue_many([(i, b"x") for i in plain])
        vip = [generate("JOB") for _ in range(3)]
        for i in vip:
            q.admit(i, b"x", lane="vip")
        return {"dead": dead, "plain": plain, "vip": vip}
    finally:
        conn.close()


def _cli(valkey_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin", "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-c", "from echomq._entry import main; main()", "search", *args,
                           "--url", valkey_url], capture_output=True, text=True, env=env, timeout=120)


def test_echomq_search_pages_with_a_cursor_and_filters(valkey_url: str, jobs: dict[str, list[str]]) -> None:
    name = f"srch-{os.getpid()}"
    seen: list[str] = []
    cursor: list[str] = []
    for _ in range(20):
        done = _cli(valkey_url, name, "--json", "--limit", "8", "--budget", "3", *cursor)
        assert done.returncode == 0, done.stderr
        page = json.loads(done.stdout)
        seen += [h["id"] for h in page["hits"]]
        if page["cursor"] is None:
            break
        cursor = ["--cursor", page["cursor"]]
    assert sorted(seen) == sorted(jobs["dead"] + jobs["plain"] + jobs["vip"])
    vip = json.loads(_cli(valkey_url, name, "--json", "--lane", "vip").stdout)
    assert sorted(h["id"] for h in vip["hits"]) == sorted(jobs["vip"])
    dead = _cli(valkey_url, name, "--error-type", "ValueError", "--text", "declined")
    assert dead.returncode == 0 and all(i in dead.stdout for i in jobs["dead"]) and "end" in dead.stdout
    bad = _cli(valkey_url, name, "--cursor", "nonsense")
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "cursor" in bad.stderr


@pytest.fixture(scope="module")
def site(valkey_url: str) -> Iterator[str]:
    options = DashboardOptions(page_size=5, sample_s=60, refresh_s=0)
    with served(create_app(valkey_url, options=options)) as url:
        yield url


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_the_dashboard_search_page_finds_and_pages(site: str, jobs: dict[str, list[str]]) -> None:
    base = f"{site}/queues/srch-{os.getpid()}"
    status, html = _get(f"{base}/search?lane=vip")
    assert status == 200 and all(i in html for i in jobs["vip"])
    assert not any(i in html for i in jobs["plain"])
    status, html = _get(f"{base}/search?state=dead&error_type=ValueError")
    assert status == 200 and all(i in html for i in jobs["dead"]) and "card declined" in html
    status, html = _get(f"{base}/search?state=pending")
    assert status == 200 and 'rel="next"' in html  # 12 pending, pages of 5
    assert _get(f"{base}/search?since=yesterday")[0] == 400
    assert "search by state" in _get(base)[1]  # the queue page links to it
