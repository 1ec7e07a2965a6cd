"""For the dashboard's browser tests: a real aiohttp server in a thread, a real headless
Chromium (Debian's ``chromium`` driven by Playwright), and queues with a job in every state.

The browser is the system's Chromium (``scripts/bootstrap.sh`` installs it); Playwright's
own browser download is never used. Without a ``chromium`` on PATH the tests fail with
that message rather than skip: CI must run them.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from aiohttp import web

from echomq import Connector, Queue, QueueOptions, generate

T = TypeVar("T")

CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def chromium_path() -> str:
    path = shutil.which("chromium")
    assert path, "no chromium on PATH: run scripts/bootstrap.sh (it installs Debian's chromium)"
    return path


@contextmanager
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


@contextmanager
def served(app: web.Application) -> Iterator[str]:
    """Serve ``app`` on a free loopback port from a thread of its own; yields its base URL."""
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app, shutdown_timeout=2.0)  # the browser's keep-alive must not hold teardown
    ready = threading.Event()
    box: dict[str, Any] = {}

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, "127.0.0.1", 0)
            loop.run_until_complete(site.start())
            box["url"] = f"http://127.0.0.1:{runner.addresses[0][1]}"
        except BaseException as exc:
            box["error"] = exc
        ready.set()
        if "url" in box:
            loop.run_forever()
        loop.run_until_complete(runner.cleanup())
        loop.close()

    thread = threading.Thread(target=run, name="dashboard", daemon=True)
    thread.start()
    assert ready.wait(30), "the dashboard did not start within 30 s"
    if "error" in box:
        raise box["error"]
    try:
        yield box["url"]
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)


ERROR = ("ValueError: the mail server said no\n"
         "Traceback (most recent call last):\n  File \"app.py\", line 3, in send\nValueError: no")


def seed(url: str, name: str, *, pending: int = 30) -> dict[str, list[str]]:
    """A queue with jobs in every state; returns the ids by state (and ``hostile``, ``binary``).

    Blocking API throughout: Playwright's sync API keeps an event loop running in the
    test's thread, so no ``asyncio.run`` may happen there."""
    conn = Connector.from_url(url)
    q = Queue(conn, name, options=QueueOptions(max_attempts=1))
    try:
        plain = [generate("JOB") for _ in range(pending + 12)]
        for i, job in enumerate(plain):
            q.enqueue(job, json.dumps({"to": f"user{i}@example.com", "n": i}).encode())
        hostile, binary, laned = generate("JOB"), generate("JOB"), generate("JOB")
        q.admit(hostile, b"<script>window.__pwned = 1</script><b>bold</b>", lane="player-7",
                serial=True)
        q.admit(binary, b"\x00\x01\xfe\xffbinary\x80", lane="player-9")
        q.admit(laned, b"{}", lane="player-9")
        delayed = generate("JOB")
        q.admit(delayed, b"later", delay_ms=3_600_000)
        leases = q.claim(12, lease_ms=600_000, window=12)
        assert [x.id for x in leases] == plain[:12]
        q.complete_many(leases[:5])
        for x in leases[5:9]:
            q.retry(x, delay_ms=0, error=ERROR)
        return {"done": plain[:5], "dead": plain[5:9], "active": plain[9:12],
                "pending": [*plain[12:], hostile, binary, laned], "delayed": [delayed],
                "hostile": [hostile], "binary": [binary]}
    finally:
        conn.close()


def in_thread(fn: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine to completion on a loop of its own in another thread (Playwright's
    sync API keeps a loop running in the test's thread)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = asyncio.run(fn())
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(60)
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


def register_worker(url: str, queue: str, name: str, about: dict[str, Any]) -> None:
    """Register a worker on ``queue`` for ten minutes through echomq's registry."""
    from echomq import AsyncConnector
    from echomq.client.registry import Registration

    async def beat() -> None:
        conn = AsyncConnector.from_url(url)
        try:
            await Registration(conn, [queue], name=name, beat_s=60, ttl_s=600, about=lambda: about).beat()
        finally:
            await conn.aclose()
    in_thread(beat)


def counts(url: str, name: str) -> dict[str, int]:
    conn = Connector.from_url(url)
    try:
        s = Queue(conn, name).stats()
        return {"pending": s.pending, "active": s.active, "delayed": s.delayed, "done": s.done,
                "dead": s.dead}
    finally:
        conn.close()


def row(url: str, name: str, job: str) -> dict[str, bytes] | None:
    conn = Connector.from_url(url)
    try:
        return Queue(conn, name).job(job)
    finally:
        conn.close()
