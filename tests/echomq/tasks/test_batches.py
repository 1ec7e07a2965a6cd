"""Batches of typed tasks (issue 27 item 2; decision 0041): many jobs, callbacks on success,
on completion and on death, each admitted once, and the batch's progress readable while it
runs; on one server and on the 3+3 cluster, the jobs in two queues on different slots."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from echomq import (
    App,
    BatchStatus,
    InvalidArgument,
    JobCancelled,
    JobNotFound,
    ResultTimeout,
    chain,
    group,
)
from echomq.tasks.workflows import run_batch
from tests.conftest import keys_of
from tests.echomq.tasks.support import running
from tests.echomq.test_flows import other_slot


def _app(conn: Any, qname: str) -> tuple[App, Any, dict[str, list[Any]]]:
    app = App(connector=conn, queue=qname)
    seen: dict[str, list[Any]] = {"success": [], "complete": [], "death": [], "jobs": []}
    gate = asyncio.Event()

    @app.task(queue=other_slot(qname), give_up_on=ValueError)
    async def work(n: int) -> int:
        if n < 0:
            await gate.wait()  # held until the test opens the gate
        seen["jobs"].append(n)
        if n == 13:
            raise ValueError("unlucky")
        return n * 2

    @app.task(queue=other_slot(qname))
    async def double(n: int) -> int:
        return n * 2

    @app.task()
    async def succeeded(status: BatchStatus, note: str) -> str:
        seen["success"].append((status, note))
        return note

    @app.task()
    async def completed(status: BatchStatus) -> int:
        seen["complete"].append(status)
        return status.total

    @app.task()
    async def died(tag: str) -> str:
        seen["death"].append(tag)
        return tag

    work.gate = gate  # type: ignore[attr-defined]
    return app, (work, double, succeeded, completed, died), seen


async def _wait(cond: Any, what: str) -> None:
    for _ in range(400):
        if cond():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"not reached: {what}")


def _jobs(raw: Any, queue: str) -> set[str]:
    return {k for k in keys_of(raw, queue) if ":job:" in k}


async def test_a_batch_reports_progress_then_calls_success_and_complete_once(
        conn: Any, raw: Any, qname: str) -> None:
    app, (work, double, succeeded, completed, died), seen = _app(conn, qname)
    async with running(app, conn):
        jobs = [work.s(i) for i in range(8)] + [work.s(-1), chain(double.s(1), double.s())]
        batch = await app.batch(jobs, on_success=succeeded.s("all good"),
                                on_complete=completed.s(), on_death=died.si("never"))
        await _wait(lambda: len(seen["jobs"]) == 8, "eight jobs ran")
        progress = await batch.progress()
        assert (progress.total, progress.failed, progress.state) == (10, 0, "waiting")
        assert progress.done <= 9 and progress.pending >= 1  # the gated job still runs
        row = await app.queue(qname).job(batch.id)
        assert row is not None
        payload = row["payload"]  # the batch's own job, waiting
        work.gate.set()
        status = await batch.result(timeout=20)
        assert (status.id, status.total, status.done, status.failed) == (batch.id, 10, 10, 0)
        assert await succeeded.handle(batch.callback_id("success")).result(timeout=20) == "all good"
        assert await completed.handle(batch.callback_id("complete")).result(timeout=20) == 10
        with pytest.raises((JobNotFound, ResultTimeout)):
            await died.handle(batch.callback_id("death")).result(timeout=0.5)
        # the batch's job run again (a worker lost after admitting its callbacks): each
        # callback's id is derived from the batch's, so none is admitted twice
        jobs_before = _jobs(raw, qname)
        await run_batch(app, app.queue(qname), batch.id, payload.split(b"\n", 1)[1])
        assert _jobs(raw, qname) == jobs_before
    assert [s.total for s, _ in seen["success"]] == [10] and seen["death"] == []
    assert len(seen["complete"]) == 1 and seen["complete"][0].done == 10


async def test_a_batch_with_a_dead_job_calls_death_and_complete_not_success(
        conn: Any, qname: str) -> None:
    app, (work, _, succeeded, completed, died), seen = _app(conn, qname)
    async with running(app, conn):
        batch = await app.batch(group(work.s(1), work.s(13), work.s(2)),
                                on_success=succeeded.s("no"), on_complete=completed.s(),
                                on_death=died.si("a job died"))
        status = await batch.result(timeout=30)
        assert (status.total, status.done, status.failed) == (3, 2, 1)
        assert await died.handle(batch.callback_id("death")).result(timeout=20) == "a job died"
        assert await completed.handle(batch.callback_id("complete")).result(timeout=20) == 3
        assert (await batch.progress()).pending == 0
    assert seen["success"] == [] and seen["death"] == ["a job died"]


async def test_a_batch_is_checked_before_anything_is_written(conn: Any, qname: str) -> None:
    app, (work, _, succeeded, completed, _), _ = _app(conn, qname)
    with pytest.raises(InvalidArgument):
        await app.batch([])
    with pytest.raises(InvalidArgument):
        await app.batch([work.s("one")])
    with pytest.raises(InvalidArgument):
        await app.batch([work.s(1)], on_success=succeeded.s())  # its note is missing
    with pytest.raises(InvalidArgument):
        await app.batch([work.s(1)], on_complete=completed)  # type: ignore[arg-type]


async def test_a_cancelled_batch_cancels_its_jobs_and_runs_no_callback(conn: Any, qname: str) -> None:
    app, (work, _, succeeded, completed, died), seen = _app(conn, qname)
    async with running(app, conn):
        batch = await app.batch([work.s(-1), work.s(-2)], on_success=succeeded.s("no"),
                                on_complete=completed.s(), on_death=died.si("no"))
        assert await batch.cancel()
        progress = await batch.progress()
        assert (progress.state, progress.total) == ("cancelled", 2)
        with pytest.raises(JobCancelled):
            await batch.result(timeout=10)
        work.gate.set()  # the running ones were asked to stop; whatever they do, no callback
        for kind in ("success", "complete", "death"):
            assert await app.queue(qname).job(batch.callback_id(kind)) is None
    assert seen["success"] == seen["complete"] == seen["death"] == []


async def test_the_blocking_twin_admits_a_batch_and_reads_its_status(
        conn: Any, sync_conn: Any, qname: str) -> None:
    app, (work, _, _, completed, _), _ = _app(conn, qname)
    app._sync_connector = sync_conn
    async with running(app, conn):
        batch = await asyncio.to_thread(app.batch_sync, [work.s(1), work.s(2)],
                                        on_complete=completed.s())
        status = await asyncio.to_thread(batch.result, timeout=20)
        assert (status.total, status.done, status.failed) == (2, 2, 0)
        assert (await asyncio.to_thread(batch.progress)).pending == 0
        assert await completed.handle(batch.callback_id("complete")).result(timeout=20) == 2
