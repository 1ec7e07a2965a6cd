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

from echomq import App, AsyncQueue, Verdict, generate


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
