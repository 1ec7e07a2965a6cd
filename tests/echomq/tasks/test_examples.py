"""The typed-task examples (issue 26, item 7) run as written, on one server and on the
cluster: the README's first example (examples/hello_tasks.py, included verbatim) under
``echomq worker``, a FastAPI application (routes admit and await, over httpx's ASGI
transport), and Django-style blocking views."""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from tests.echomq.tasks.support import running

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"
ENTRY = "from echomq._entry import main; main()"


def load(name: str, url: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """Import examples/<name>.py afresh, under its own name (its tasks' names are the ones
    ``echomq worker <name>:app`` knows), with ECHOMQ_URL set to ``url``."""
    monkeypatch.setenv("ECHOMQ_URL", url)
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # get_type_hints looks it up
    spec.loader.exec_module(module)
    return module


def env_for(url: str) -> dict[str, str]:
    return {**os.environ, "ECHOMQ_URL": url, "PYTHONPATH": str(ROOT / "src")}


@pytest.fixture
def worker_of(backend_url: str) -> Iterator[Any]:
    """``echomq worker examples.<module>:app`` as an operator starts it, stopped by SIGTERM."""
    procs: list[subprocess.Popen[str]] = []

    def start(module: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen([sys.executable, "-c", ENTRY, "worker", f"{module}:app"], cwd=EXAMPLES,
                                env=env_for(backend_url), stderr=subprocess.PIPE, text=True)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err


def test_the_readme_names_the_first_example_and_includes_it_verbatim_if_at_all() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "examples/hello_tasks.py" in readme
    blocks = re.findall(r"```python\n(# hello_tasks\.py.*?)```", readme, flags=re.S)
    assert all(b == (EXAMPLES / "hello_tasks.py").read_text() for b in blocks)


def test_the_first_example_runs_under_echomq_worker(backend_url: str, worker_of: Any) -> None:
    worker_of("hello_tasks")
    outs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "hello_tasks.py"], cwd=EXAMPLES, env=env_for(backend_url),
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        outs.append(done.stdout.splitlines())
    assert outs[1] == ["Verdict.DUPLICATE", "Invoice(order='order-42', total_cents=2499)"]
    assert outs[0][1:] == outs[1][1:]


async def test_fastapi_routes_admit_and_await_typed_results(
        backend_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ex = load("fastapi_app", backend_url, monkeypatch)
    transport = httpx.ASGITransport(app=ex.api)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client, \
            running(ex.app, ex.app.connector()):
        made = await client.post("/thumbnails", params={"image": "cat.png", "width": 640})
        assert made.status_code == 200 and made.json()["verdict"] == "enqueued"
        got = await client.get(f"/thumbnails/{made.json()['id']}", params={"wait": 10})
        assert got.json() == {"image": "cat.png", "width": 640, "height": 480}
        refused = await client.post("/thumbnails", params={"image": "cat.png", "width": "wide"})
        assert refused.status_code == 422  # FastAPI's own check; ours stands behind it
        missing = await client.get("/thumbnails/nope", params={"wait": 0})
        assert missing.status_code == 404
    await ex.app.aclose()


def test_django_style_views_admit_and_wait_blocking(
        backend_url: str, monkeypatch: pytest.MonkeyPatch, worker_of: Any) -> None:
    ex = load("django_style", backend_url, monkeypatch)
    worker_of("django_style")
    try:
        views(ex, backend_url)
    finally:
        ex.app.close()


def views(ex: Any, backend_url: str) -> None:
    user = os.getpid() * 1000 + (1 if "cluster" in backend_url else 0)
    status, first = ex.signup_view({"user_id": str(user), "email": "ada@example.org"})
    again = ex.signup_view({"user_id": str(user), "email": "ada@example.org"})[1]
    assert (status, first["duplicate"], again["duplicate"], again["job"]) == (202, False, True, first["job"])
    assert settled(ex, first["job"]) == (200, {"state": "sent", "welcome": {
        "to": "ada@example.org", "subject": f"welcome, user {user}"}})
    bad = ex.signup_view({"user_id": str(user + 1), "email": "nobody"})[1]
    assert settled(ex, bad["job"]) == (200, {"state": "failed", "error": "not an address: 'nobody'"})
    assert ex.signup_view({"user_id": "x", "email": "a@b"})[0] == 400
    jobs = ex.import_view([(user + 2, "b@example.org"), (user + 3, "c@example.org")])[1]["jobs"]
    assert [settled(ex, j)[1]["state"] for j in jobs] == ["sent", "sent"]


def settled(ex: Any, job_id: str) -> Any:
    """The status view's answer once it is not "waiting" (the view waits 5 s a call; the
    worker process may still be starting on a loaded machine)."""
    for _ in range(12):
        got = ex.status_view(job_id)
        if got[1]["state"] != "waiting":
            return got
    raise AssertionError(f"job {job_id} still waiting after a minute")
