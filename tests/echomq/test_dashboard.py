"""The dashboard in a real headless Chromium, over a real server with a job in every state.

One server, one dashboard (sampling every 0.2 s) and one browser for the module; each
test uses a fresh queue or leaves the others' as they were. Screenshots of every page
go to the test's tmp_path for a person to look at.
"""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from echomq.ops.dashboard import DashboardOptions, create_app
from echomq.servers.server import EmbeddedValkey
from tests.dashboard_support import browser, counts, register_worker, row, seed, served

TOKEN = "s3cret-dashboard-token"
Q = "emails"


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddedValkey]:
    with EmbeddedValkey(appendonly=False) as s:
        yield s


@pytest.fixture(scope="module")
def jobs(server: EmbeddedValkey) -> dict[str, list[str]]:
    ids = seed(server.url, Q)
    register_worker(server.url, Q, "mailer-1", {"concurrency": 8, "running": 2,
                                                "last_minute": {"processed": 42, "failed": 3}})
    return ids


@pytest.fixture(scope="module")
def site(server: EmbeddedValkey, jobs: dict[str, list[str]]) -> Iterator[str]:
    opts = DashboardOptions(token=TOKEN, page_size=10, sample_s=0.2, refresh_s=0)
    with served(create_app(server.url, options=opts)) as url:
        yield url


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    with browser() as b:
        yield b


@pytest.fixture
def page(chromium: Any) -> Iterator[Any]:
    ctx = chromium.new_context(viewport={"width": 1280, "height": 900})
    p = ctx.new_page()
    p.set_default_timeout(15_000)
    dialogs: list[str] = []
    p.on("dialog", lambda d: (dialogs.append(d.message), d.accept()))
    p.dialogs = dialogs
    yield p
    ctx.close()


def shot(page: Any, tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000  # a rendered page, not a blank one
    return path


def sign_in(page: Any, site: str) -> None:
    page.goto(f"{site}/login")
    page.fill("input[name=token]", TOKEN)
    page.click("text=Sign in >> nth=-1")
    page.wait_for_url(f"{site}/")


def test_overview_shows_every_state_charts_and_the_queue(page: Any, site: str, tmp_path: Path) -> None:
    page.goto(site + "/")
    row_ = page.locator("table.queues tbody tr", has_text=Q)
    cells = row_.locator("td").all_inner_texts()
    assert cells[:7] == [Q, "33", "3", "1", "5", "4", "0"]  # pending active delayed done dead expired
    assert re.search(r"ago", cells[7])  # the oldest pending job's age
    assert cells[8] == "5 / 4" and cells[-1] == "1"  # done / dead in the last minute; workers
    worker = page.locator("table.workers tbody tr").first.locator("td").all_inner_texts()
    assert worker[:5] == ["mailer-1", Q, "8", "2", "42 / 3"] and worker[5].startswith("in ")
    # The sampler has run: the charts hold points, and the throughput chart names the queue.
    page.wait_for_function("document.querySelectorAll('svg.chart circle').length > 0", timeout=10_000)
    page.reload()
    assert page.locator("svg.chart").count() == 3
    assert Q in (page.locator("svg.chart").first.text_content() or "")
    shot(page, tmp_path, "overview")


def test_queue_page_lists_a_state_pages_and_counts_lanes(page: Any, site: str,
                                                         jobs: dict[str, list[str]], tmp_path: Path
                                                         ) -> None:
    page.goto(f"{site}/queues/{Q}?state=dead")
    ids = page.locator("table.jobs tbody a.mono").all_inner_texts()
    assert sorted(ids) == sorted(jobs["dead"])
    assert page.locator("table.jobs tbody tr").first.locator("td").nth(4).inner_text() == (
        "ValueError: the mail server said no")  # the first line; the traceback is on the job's page
    shot(page, tmp_path, "queue-dead")
    page.goto(f"{site}/queues/{Q}?state=pending")
    assert "page 1 of 4" in page.inner_text(".pager")
    first = page.locator("table.jobs tbody a.mono").all_inner_texts()
    page.click("a[rel=next]")
    second = page.locator("table.jobs tbody a.mono").all_inner_texts()
    assert len(first) == len(second) == 10 and not set(first) & set(second)
    assert "page 2 of 4" in page.inner_text(".pager")
    lanes = page.locator("table.lanes tbody tr").all_inner_texts()
    assert any(line.startswith("player-9\t2") for line in lanes), lanes
    assert any(line.startswith("player-7\t1") for line in lanes), lanes
    shot(page, tmp_path, "queue-pending-page2")


def test_search_by_id_opens_the_job_and_a_miss_says_so(page: Any, site: str,
                                                      jobs: dict[str, list[str]]) -> None:
    page.goto(f"{site}/queues/{Q}")
    page.fill("form.search input[name=id]", jobs["dead"][0])
    page.click("form.search button")
    page.wait_for_url(re.compile(rf".*/jobs/{jobs['dead'][0]}$"))
    page.goto(f"{site}/queues/{Q}")
    page.fill("form.search input[name=id]", "JOB00000000000000000000000000")
    page.click("form.search button")
    assert "No job JOB00000000000000000000000000" in page.inner_text(".flash.err")


def test_job_page_shows_error_traceback_and_pretty_json(page: Any, site: str,
                                                        jobs: dict[str, list[str]], tmp_path: Path
                                                        ) -> None:
    page.goto(f"{site}/queues/{Q}/jobs/{jobs['dead'][0]}")
    assert page.inner_text(".badge").strip() == "dead"
    assert '"to": "user5@example.com"' in page.inner_text("pre.payload.json")
    assert "Traceback (most recent call last)" in page.inner_text("pre.traceback")
    facts = page.inner_text("dl.facts")
    assert "attempts\n1" in facts and "died" in facts
    shot(page, tmp_path, "job-dead")
    page.goto(f"{site}/queues/{Q}/jobs/{jobs['active'][0]}")
    assert "lease deadline" in page.inner_text("dl.facts")


def test_payloads_are_shown_escaped_never_run(page: Any, site: str, jobs: dict[str, list[str]],
                                              tmp_path: Path) -> None:
    page.goto(f"{site}/queues/{Q}/jobs/{jobs['hostile'][0]}")
    assert page.inner_text("pre.payload") == "<script>window.__pwned = 1</script><b>bold</b>"
    assert page.evaluate("window.__pwned") is None
    assert page.locator("pre.payload b").count() == 0
    page.goto(f"{site}/queues/{Q}/jobs/{jobs['binary'][0]}")
    assert page.inner_text("pre.payload.hex").startswith("00000000  00 01 fe ff 62 69 6e")
    shot(page, tmp_path, "job-binary")


def _post(url: str, data: bytes, headers: dict[str, str]) -> tuple[int, str]:
    req = urllib.request.Request(url, data=data, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_an_action_without_the_token_is_refused_and_changes_nothing(
        page: Any, site: str, server: EmbeddedValkey, jobs: dict[str, list[str]]) -> None:
    before = counts(server.url, Q)
    form = f"action=retry&state=dead&id={jobs['dead'][0]}".encode()
    plain = {"Content-Type": "application/x-www-form-urlencoded"}
    assert _post(f"{site}/queues/{Q}/actions", form, plain)[0] == 401
    wrong = {**plain, "Authorization": "Bearer not-the-token"}
    assert _post(f"{site}/queues/{Q}/actions", form, wrong)[0] == 401
    # From the browser, signed out: no checkbox, no button, and a forged post is refused.
    page.goto(f"{site}/queues/{Q}?state=dead")
    assert page.locator("button.act").count() == 0
    status = page.evaluate("""async (id) => (await fetch('/queues/emails/actions', {method: 'POST',
        headers: {'Content-Type': 'application/x-www-form-urlencoded'},
        body: 'action=delete&state=dead&id=' + id})).status""", jobs["dead"][0])
    assert status == 401
    assert counts(server.url, Q) == before


def test_retry_of_a_selected_dead_job_in_the_browser_requeues_it(
        page: Any, site: str, server: EmbeddedValkey, jobs: dict[str, list[str]], tmp_path: Path
) -> None:
    before = counts(server.url, Q)
    sign_in(page, site)
    page.goto(f"{site}/queues/{Q}?state=dead")
    target = jobs["dead"][1]
    assert page.locator("button.act.retry").is_disabled()  # nothing selected yet
    page.check(f"input[name=id][value={target}]")
    shot(page, tmp_path, "queue-dead-selected")
    page.click("button.act.retry")
    page.wait_for_selector(".flash.ok")
    assert page.dialogs == [f"Retry 1 dead job(s) of {Q}?"]
    assert "requeued 1 job" in page.inner_text(".flash.ok")
    after = counts(server.url, Q)
    assert (after["dead"], after["pending"]) == (before["dead"] - 1, before["pending"] + 1)
    moved = row(server.url, Q, target)
    assert moved is not None and moved["state"] == b"pending" and moved["failures"] == b"0"
    assert target not in page.locator("table.jobs tbody").inner_text()
    shot(page, tmp_path, "queue-after-retry")


def test_delete_waiting_jobs_goes_through_cancel_and_a_refused_confirm_does_nothing(
        chromium: Any, site: str, server: EmbeddedValkey, jobs: dict[str, list[str]]) -> None:
    ctx = chromium.new_context()
    p = ctx.new_page()
    sign_in(p, site)
    before = counts(server.url, Q)
    p.once("dialog", lambda d: d.dismiss())
    p.goto(f"{site}/queues/{Q}?state=delayed")
    p.check("input.all")
    p.click("button.act.delete")
    assert counts(server.url, Q) == before  # dismissed: nothing sent
    p.once("dialog", lambda d: d.accept())
    p.click("button.act.delete")
    p.wait_for_selector(".flash.ok")
    assert counts(server.url, Q)["delayed"] == before["delayed"] - 1
    kept = row(server.url, Q, jobs["delayed"][0])  # cancelled, kept in the done set (decision 0023)
    assert kept is not None and kept["state"] == b"cancelled"
    ctx.close()


def test_read_only_mode_refuses_even_with_the_token(chromium: Any, server: EmbeddedValkey,
                                                    jobs: dict[str, list[str]]) -> None:
    opts = DashboardOptions(token=TOKEN, read_only=True, sample_s=1, refresh_s=0)
    with served(create_app(server.url, options=opts)) as url:
        before = counts(server.url, Q)
        form = f"action=delete&state=dead&id={jobs['dead'][2]}".encode()
        status, text = _post(f"{url}/queues/{Q}/actions", form, {
            "Content-Type": "application/x-www-form-urlencoded", "Authorization": f"Bearer {TOKEN}"})
        assert (status, text.strip()) == (403, "read-only mode: actions are refused")
        ctx = chromium.new_context()
        p = ctx.new_page()
        p.goto(f"{url}/queues/{Q}?state=dead")
        assert p.inner_text("header .mode") == "read-only"
        assert p.locator("input[name=id][type=checkbox]").count() == 0
        ctx.close()
        assert counts(server.url, Q) == before


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_bad_requests_are_4xx_pages_not_tracebacks(site: str) -> None:
    for path, status in ((f"/queues/{Q}?state=nope", 400), (f"/queues/{Q}?page=x", 400),
                         (f"/queues/{Q}/jobs/not-an-id", 400), ("/queues/no-such-queue", 404),
                         (f"/queues/{Q}/jobs/JOB00000000000000000000000000", 404)):
        got, text = _get(site + path)
        assert got == status and "Traceback" not in text, path


def test_metrics_endpoint_exposes_depth_by_state(site: str) -> None:
    with urllib.request.urlopen(f"{site}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    assert re.search(r'^echomq_jobs\{queue="emails",state="active"\} 3\.0$', text, re.M), text
    assert re.search(r'^echomq_oldest_pending_age_seconds\{queue="emails"\} \d', text, re.M), text
    assert re.search(r'^echomq_completed_per_second\{queue="emails"\} ', text, re.M), text


def test_pause_and_resume_buttons_stop_and_restart_claims(
        page: Any, site: str, server: EmbeddedValkey, tmp_path: Path) -> None:
    """The queue page shows the claim gate; a signed-in operator pauses the queue (claims
    stop, admissions go on) and resumes it, each after a confirmation."""
    from echomq import Connector, Queue, RateLimit, generate

    conn = Connector.from_url(server.url)
    q = Queue(conn, "gated")
    try:
        q.enqueue(generate("JOB"), b"x")
        q.set_limits(rate=RateLimit(30, 1000))
        page.goto(f"{site}/queues/gated")
        assert "running" in page.inner_text(".gate") and "rate 30 per 1,000 ms" in page.inner_text(".gate")
        assert page.locator(".gate button").count() == 0  # not signed in: no button
        sign_in(page, site)
        page.goto(f"{site}/queues/gated")
        page.click(".gate button.act.pause")
        page.wait_for_selector(".flash.ok")
        assert "paused" in page.inner_text(".flash.ok") and q.gate().paused
        assert page.dialogs == ["Pause claims on gated?"]
        assert q.claim(1, lease_ms=1000) == [] and q.stats().pending == 1
        q.enqueue(generate("JOB"), b"y")  # admissions go on
        shot(page, tmp_path, "queue-paused")
        page.click(".gate button.act.resume")
        page.wait_for_selector(".flash.ok")
        assert not q.gate().paused and len(q.claim(2, lease_ms=1000)) == 2
    finally:
        conn.close()


def test_job_page_shows_its_flow_as_a_tree_with_each_state(page: Any, site: str,
                                                          server: EmbeddedValkey,
                                                          tmp_path: Path) -> None:
    from echomq import Connector, Queue, generate
    from echomq.protocol.flows import FlowSpec

    conn = Connector.from_url(server.url)
    try:
        top, mid = Queue(conn, "flow-top"), Queue(conn, "flow-mid")
        leaf, done_leaf, side = generate("JOB"), generate("JOB"), generate("JOB")
        inner = FlowSpec(mid.name, generate("JOB"), b"inner",
                         (FlowSpec(mid.name, leaf, b"a"), FlowSpec(mid.name, done_leaf, b"b")))
        root = FlowSpec(top.name, generate("JOB"), b"root", (inner, FlowSpec(top.name, side, b"c")))
        assert top.flows.admit_tree(root)
        lease = next(x for x in mid.claim(2, lease_ms=600_000) if x.id == done_leaf)
        mid.complete(lease, b"ok")  # its parent is in its queue: settled in place (0041)
        assert mid.flows.relay(mid.name).relayed == 0
    finally:
        conn.close()
    page.goto(f"{site}/queues/{mid.name}/jobs/{done_leaf}")  # a leaf's page shows the whole flow
    tree = page.locator("ul.flow-tree")
    states = {li.get_attribute("data-id"): li.get_attribute("data-state")
              for li in tree.locator("li[data-id]").all()}
    assert states == {root.id: "waiting", inner.id: "waiting", leaf: "active",
                      done_leaf: "done", side: "pending"}
    assert "done for its parent" in tree.locator(f'li[data-id="{done_leaf}"]').inner_text()
    assert tree.locator("li.me").get_attribute("data-id") == done_leaf
    # nested: the leaves sit under the inner parent, which sits under the root
    assert tree.locator(f'li[data-id="{root.id}"] li[data-id="{inner.id}"] li[data-id="{leaf}"]').count() == 1
    shot(page, tmp_path, "job-flow")
    page.click(f'ul.flow-tree a:text("{root.id}")')  # each node links to its own page
    page.wait_for_url(re.compile(rf".*/queues/flow-top/jobs/{root.id}$"))
    assert page.inner_text(".badge >> nth=0").strip() == "waiting"
