"""arq driver: ArqRedis.enqueue_job; no bulk API (asyncio.gather of enqueue_job); `arq --burst`."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from typing import Any

from _common import (
    PAYLOAD,
    URL,
    Phase,
    Sampling,
    awarm_up,
    collect_latency,
    conc,
    drain,
    emit,
    latency_stats,
    memory_result,
    op_n,
    raw,
    stop,
    worker,
)
from arq import create_pool
from arq.connections import RedisSettings

API = {"single": "ArqRedis.enqueue_job", "bulk": "asyncio.gather(enqueue_job) in chunks of 1000",
       "worker": "arq WorkerSettings --burst (defaults: max_jobs 10)"}
CONCURRENCY = conc(10)
API["worker"] = f"arq WorkerSettings --burst (max_jobs {CONCURRENCY}, poll_delay 5 ms)"
BIN = os.path.dirname(sys.executable)


async def noop(ctx: Any, p: str) -> None:
    pass


async def lat(ctx: Any, t: float) -> None:
    raw.rpush("bench:lat", time.time() - t)


class WorkerSettings:
    functions = [noop, lat]  # noqa: RUF012
    max_jobs = CONCURRENCY
    # arq sleeps poll_delay (0.5 s by default) between reads of its queue; at max_jobs 1 that
    # is two jobs a second. Its documented WorkerSettings option, set short at every level.
    poll_delay = 0.005
    redis_settings = RedisSettings.from_dsn(os.environ.get("BENCH_URL", URL))


async def main() -> None:
    op, n = op_n()
    pool = await create_pool(RedisSettings.from_dsn(URL))

    async def bulk() -> None:
        for s in range(0, n, 1000):
            await asyncio.gather(*(pool.enqueue_job("noop", PAYLOAD) for _ in range(s, min(n, s + 1000))))

    if op == "single":
        with Phase() as ph:
            for _ in range(n):
                await pool.enqueue_job("noop", PAYLOAD)
        emit(ph.result(n, api=API["single"]))
    elif op in ("bulk", "memory", "drain"):
        m0 = raw.info("memory")["used_memory"]
        with Phase() as ph:
            await bulk()
        if op == "bulk":
            emit(ph.result(n, api=API["bulk"]))
        elif op == "memory":
            emit(memory_result(n, m0))
        else:
            def finish(p: subprocess.Popen[bytes]) -> None:
                p.wait(600)
            r = drain(n, lambda: int(raw.zcard("arq:queue")),
                      lambda: worker([f"{BIN}/arq", "arq_sys.WorkerSettings", "--burst"]), finish)
            r.update(api=API["worker"], concurrency=CONCURRENCY,
                     fill_server_us=ph.server_cpu / n * 1e6,
                     life_server_us=ph.server_cpu / n * 1e6 + r["server_us"])
            emit(r)
    elif op == "latency":
        with Sampling() as s:
            w = worker([f"{BIN}/arq", "arq_sys.WorkerSettings"])
            await awarm_up(lambda: pool.enqueue_job("lat", time.time()))
            for _ in range(n):
                await pool.enqueue_job("lat", time.time())
                await asyncio.sleep(0.01)
            await asyncio.sleep(1.5)
            stop(w)
        emit(latency_stats(collect_latency()) | {"api": API["worker"], "noise": s.noise})
    await pool.aclose()


if __name__ == "__main__":
    asyncio.run(main())
