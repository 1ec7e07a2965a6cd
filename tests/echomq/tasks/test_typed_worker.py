"""Typed tasks run by the worker (issue 26, items 5-6): payloads it cannot read and tasks
it does not know are failed attempts with typed errors (the worker lives on), ``echomq
worker module:app`` runs every queue of the app (or ``--queue`` some), and schedules
declared on tasks are admitted exactly once per tick by the worker."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from echomq import (
    App,
    AsyncQueue,
    JobFailed,
    Schedule,
    TaskContext,
    UnknownTask,
    UnreadablePayload,
    Verdict,
    generate,
    tick_of,
)
from echomq.core.errors import InvalidArgument
from echomq.ops.worker import settings_for
from tests.echomq.tasks.support import running

ROOT = Path(__file__).resolve().parents[3]


async def test_unreadable_payloads_and_unknown_tasks_fail_their_attempts_typed(
        conn: Any, qname: str) -> None:
    app = App(connector=conn, queue=qname)
    ran: list[int] = []

    @app.task()
    async def count(n: int) -> int:
        ran.append(n)
        return n

    q = AsyncQueue(conn, qname)
    bad = {
        "raw bytes": b"\x00\x01 not an envelope",
        "another version": b"EMQT9 json " + count.name.encode() + b"\n[1]",
        "another format": b"EMQT1 msgpack " + count.name.encode() + b"\n\x91\x01",
        "wrong arguments": b"EMQT1 json " + count.name.encode() + b'\n["one"]',
        "missing argument": b"EMQT1 json " + count.name.encode() + b"\n[]",
        "unknown task": b"EMQT1 json nowhere.gone\n[1]",
    }
    ids = {what: generate("JOB") for what in bad}
    for what, payload in bad.items():
        assert await q.admit(ids[what], payload, max_attempts=2) is Verdict.ENQUEUED
    async with running(app, conn) as worker:
        errors = {}
        for what, job_id in ids.items():
            with pytest.raises(JobFailed) as failed:
                await q.result(job_id, timeout=20)
            errors[what] = (failed.value.remote_type, failed.value.failures)
        good = await count.admit(7)
        assert await good.result(timeout=10) == 7  # the same worker, still serving
        assert worker.report.stopped_s is None
    unreadable, unknown = UnreadablePayload.__name__, UnknownTask.__name__
    assert errors == {"raw bytes": (unreadable, 2), "another version": (unreadable, 2),
                      "another format": (unreadable, 2), "wrong arguments": (unreadable, 2),
                      "missing argument": (unreadable, 2),
                      "unknown task": (unknown, 2)}
    assert ran == [7]  # none of the bad payloads ran the task


async def test_a_job_admitted_before_its_task_gained_a_defaulted_parameter_still_runs(
        conn: Any, qname: str) -> None:
    old = App(connector=conn, queue=qname)

    @old.task(name="greet")
    async def greet_v1(who: str) -> str: ...

    new = App(connector=conn, queue=qname)

    @new.task(name="greet")
    async def greet_v2(who: str, punctuation: str = "!", times: int = 1) -> str:
        return f"hello {who}{punctuation * times}"

    before = await greet_v1.admit("ada")  # its array has one argument
    async with running(new, conn):
        assert await new.tasks["greet"].handle(before.id).result(timeout=10) == "hello ada!"


def test_settings_for_an_app_serve_its_queues_or_the_chosen_ones() -> None:
    app = App(url="redis://127.0.0.1:1", queue="a")

    @app.task()
    def one() -> None: ...

    @app.task(queue="b")
    def two() -> None: ...

    assert sorted(settings_for(app).handlers) == ["a", "b"]
    assert sorted(settings_for(app, queues=["b"]).handlers) == ["b"]
    assert settings_for(app).url == "redis://127.0.0.1:1"
    with pytest.raises(InvalidArgument, match="no task of this app runs on c"):
        settings_for(app, queues=["c"])


async def test_a_task_schedule_is_admitted_once_per_tick_by_the_worker(conn: Any, qname: str) -> None:
    app = App(connector=conn, queue=qname)
    ticks: list[int] = []
    enough = asyncio.Event()

    @app.task(schedule=Schedule(every_ms=100))
    async def beat(ctx: TaskContext) -> None:
        ticks.append(tick_of(ctx.id))
        if len(ticks) >= 4:
            enough.set()

    @app.task()
    def report(kind: str) -> str:
        return kind

    bound = app.schedule(report, Schedule(name="hourly-report", every_ms=3_600_000), "sales")
    assert bound.queue == qname and bound.payload.endswith(b'["sales"]')
    with pytest.raises(InvalidArgument):
        app.schedule(report, Schedule(name="bad", every_ms=1000), 42)
    # two workers run the same schedules: each tick still runs once
    async with running(app, conn), running(app, conn):
        await asyncio.wait_for(enough.wait(), 20)
    assert len(ticks) == len(set(ticks))
    assert all(b - a >= 100 for a, b in zip(sorted(ticks), sorted(ticks)[1:], strict=False))


def test_echomq_worker_runs_an_app_from_the_command_line(
        backend_url: str, qname: str, tmp_path: Path) -> None:
    (tmp_path / "shop.py").write_text(f'''
import echomq

app = echomq.App(queue="{qname}")

@app.task()
async def double(n: int) -> int:
    return 2 * n

@app.task(queue="{qname}-slow")
def never(n: int) -> int:
    return n
''')
    env = {**os.environ, "ECHOMQ_URL": backend_url, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT / 'src'}"}
    proc = subprocess.Popen([sys.executable, "-c", "from echomq._entry import main; main()",
                             "worker", "shop:app", "--queue", qname],
                            cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    try:
        sys.path.insert(0, str(tmp_path))
        import shop  # type: ignore[import-not-found]

        shop.app.url = backend_url
        handle = shop.double.admit_sync(21)
        assert handle.result(timeout=20) == 42
        slow = shop.never.admit_sync(1)
        time.sleep(0.3)
        row = shop.app.sync_queue(f"{qname}-slow").job(slow.id)
        assert row is not None and row["state"] == b"pending"  # not a queue this worker serves
        shop.app.close()
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("shop", None)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "completed 1" in err
