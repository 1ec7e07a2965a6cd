"""``repeat_until`` ends by its flag, also when a pooled checkout swallows the cancellation.

The liveness bug it fixes: ``codemojex play`` stopped its progress bars with ``cancel()``
alone; on Python 3.11 a cancellation that meets a psycopg_pool checkout at the moment a
connection is handed over is swallowed (the pool waits with ``asyncio.wait_for``), the bars
went on polling and ``play`` waited for them forever (seen after a PostgreSQL restart,
test_play_cli's faults at every round close). Here the same meeting is made on purpose,
on a real pool of one connection.
"""

from __future__ import annotations

import asyncio

from codemojex.infra.pg import open_pool
from codemojex.infra.waiting import repeat_until, wait_for


async def test_a_repeated_step_stops_by_its_flag_when_a_checkout_swallows_the_cancel(db_url: str) -> None:
    pool = await open_pool(db_url, min_size=1, max_size=1)
    try:
        held = await pool.getconn()
        stop = asyncio.Event()
        steps = 0

        async def step() -> None:
            nonlocal steps
            steps += 1
            async with pool.connection(timeout=10):
                pass

        task = asyncio.create_task(repeat_until(stop, step, every_s=0.01))

        async def queued() -> bool:
            return pool.get_stats().get("requests_waiting", 0) == 1

        await wait_for(queued, timeout_s=10, every_s=0.005, what="the step's checkout to queue")
        await pool.putconn(held)  # the step's checkout is served ...
        stop.set()
        task.cancel()  # ... as the stop arrives
        await asyncio.wait_for(task, 10)  # a loop ended by cancel() alone would run on here
        assert steps == 1
    finally:
        await pool.close()
