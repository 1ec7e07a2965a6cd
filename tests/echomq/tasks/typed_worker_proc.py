"""A typed-task worker in its own process, for tests that kill or pause one.

    python -m tests.echomq.tasks.typed_worker_proc URL QUEUE --beat MS --lease MS

It runs :func:`declare`'s task ``faults.work`` with the same ``Worker`` ``echomq worker``
runs. Each run appends ``start <id> <attempt> <pid> <deadline>`` to the list
``testlog:{QUEUE}``, sleeps ``first_s`` seconds on the job's first attempt (none after),
and returns ``"<n> by <pid>"``. On SIGTERM it stops gracefully and prints the queue's
consumer's stats as one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import signal

from echomq import App, TaskContext, connect_async
from echomq.ops.worker import Worker, settings_for


def declare(app: App, log: object = None) -> object:
    """The task, by name, as the test's app and the worker's app both declare it."""
    conn: object = log

    @app.task(name="faults.work", max_attempts=3)
    async def work(n: int, first_s: float, ctx: TaskContext) -> str:
        if conn is not None:
            await conn.command("RPUSH", f"testlog:{{{ctx.queue.name}}}",  # type: ignore[attr-defined]
                               f"start {ctx.id} {ctx.attempt} {os.getpid()} {ctx.lease.deadline_ms}")
        if ctx.attempt == 1 and first_s:
            await asyncio.sleep(first_s)
        return f"{n} by {os.getpid()}"

    return work


async def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("queue")
    p.add_argument("--beat", type=int, default=100)
    p.add_argument("--lease", type=int, default=1000)
    a = p.parse_args()
    conn = connect_async(a.url, retry_budget_s=30)
    app = App(connector=conn, queue=a.queue)
    declare(app, conn)
    worker = Worker(settings_for(app, beat_ms=a.beat, lease_ms=a.lease, grace_s=1.0, concurrency=8),
                    connector=conn)
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, worker.stop)
    await conn.command("RPUSH", f"testlog:{{{a.queue}}}", f"ready {os.getpid()}")
    await worker.run()
    print(json.dumps(dataclasses.asdict(worker.consumers[a.queue].stats)), flush=True)
    await conn.aclose()


if __name__ == "__main__":
    asyncio.run(main())
