"""Business-key jobs keep FIFO (issue 28 item 3; docs/decisions/0043): a task's ``key=``
dedupes through a dedupe window on the key, and the job gets an ordinary time-ordered
id, so keyed jobs are claimed in the order they were admitted, among other jobs too.

Before, the job id was ``derive_id("JOB", key)`` with time part 0: ``order-0..4`` came
out in hash order, and ahead of every ``generate()`` id admitted before them.
"""

from __future__ import annotations

import asyncio
import sys
from asyncio.subprocess import PIPE
from typing import Any

import pytest

from echomq import App, AsyncQueue, InvalidArgument, Verdict, generate


def _app(conn: Any, qname: str) -> tuple[App, Any]:
    app = App(connector=conn, queue=qname)

    @app.task(key="order", name="fifo.bill")
    async def bill(order: str) -> None: ...

    return app, bill


async def test_keyed_jobs_are_claimed_in_the_order_of_admission(conn: Any, qname: str) -> None:
    _, bill = _app(conn, qname)
    q = AsyncQueue(conn, qname)
    first = generate("JOB")
    assert await q.enqueue(first, b"plain") is Verdict.ENQUEUED  # admitted before the keyed ones
    handles = [await bill.admit(f"order-{i}") for i in range(5)]
    last = generate("JOB")
    assert await q.enqueue(last, b"plain") is Verdict.ENQUEUED
    assert [h.verdict for h in handles] == [Verdict.ENQUEUED] * 5
    many = await bill.admit_many([(f"order-{i}",) for i in range(5, 8)] + [("order-2",)])
    assert [getattr(h, "verdict", h) for h in many] == [Verdict.ENQUEUED] * 3 + [Verdict.DUPLICATE]
    assert getattr(many[-1], "id", None) == handles[2].id  # the holder's handle
    leases = await q.claim(20, lease_ms=60_000)
    assert [x.id for x in leases] == [first, *(h.id for h in handles), last,
                                      *(getattr(h, "id", None) for h in many[:3])]


async def test_a_key_admitted_by_another_process_is_refused_here(
        conn: Any, qname: str, backend_url: str) -> None:
    code = (
        "import asyncio, sys\n"
        "from echomq import App\n"
        f"app = App(url={backend_url!r}, queue={qname!r})\n"
        "@app.task(key='order', name='fifo.bill')\n"
        "async def bill(order: str) -> None: ...\n"
        "async def main():\n"
        "    h = await bill.admit('order-42')\n"
        "    print(h.verdict.name, h.id)\n"
        "    await app.aclose()\n"
        "asyncio.run(main())\n")
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", code, stdout=PIPE, stderr=PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()[-2000:]
    verdict, their_id = out.decode().split()
    assert verdict == "ENQUEUED"
    _, bill = _app(conn, qname)
    mine = await bill.admit("order-42")
    assert (mine.verdict, mine.id) == (Verdict.DUPLICATE, their_id)


async def test_a_debounced_task_keeps_the_last_arguments_of_its_key(conn: Any, qname: str) -> None:
    app = App(connector=conn, queue=qname)

    @app.task(key="user", dedupe_ms=60_000, dedupe_mode="debounce", delay_ms=60_000,
              name="fifo.sync")
    async def sync(user: str, n: int) -> None: ...

    first = await sync.admit("u-1", 1)
    again = await sync.admit("u-1", 2)
    assert (first.verdict, again.verdict, again.id) == (Verdict.ENQUEUED, Verdict.REPLACED, first.id)
    row = await AsyncQueue(conn, qname).job(first.id)
    assert row is not None and sync.decode_values(row["payload"][len(sync._head):]) == ("u-1", 2)
    with pytest.raises(InvalidArgument, match="need key="):
        app.task(dedupe_ms=10, name="nokey")(lambda: None)
    with pytest.raises(InvalidArgument, match="dedupe_mode"):
        app.task(key="x", dedupe_mode="latest", name="badmode")(lambda x: x)


def test_the_blocking_admission_of_a_keyed_task_answers_alike(sync_conn: Any, qname: str) -> None:
    app = App(sync_connector=sync_conn, queue=qname)

    @app.task(key="order", name="fifo.bill")
    def bill(order: str) -> None: ...

    first, again = bill.admit_sync("order-1"), bill.admit_sync("order-1")
    assert (first.verdict, again.verdict, again.id) == (Verdict.ENQUEUED, Verdict.DUPLICATE, first.id)
    many = bill.admit_many_sync([("order-2",), ("order-1",)])
    assert [getattr(h, "verdict", h) for h in many] == [Verdict.ENQUEUED, Verdict.DUPLICATE]
    assert getattr(many[1], "id", None) == first.id
