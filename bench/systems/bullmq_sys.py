"""bullmq (Python) driver: Queue.add, Queue.addBulk, a Worker process (defaults: concurrency 1;
the drain sweep sets the Worker's ``concurrency`` option, BENCH_CONC)."""

from __future__ import annotations

import asyncio
import signal
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
from bullmq import Queue, Worker

API = {"single": "Queue.add", "bulk": "Queue.addBulk (chunks of 1000)",
       "worker": "Worker (defaults: concurrency 1)"}
CONCURRENCY = conc(1)
if CONCURRENCY != 1:
    API["worker"] = f"Worker (concurrency {CONCURRENCY})"


async def run_worker() -> None:
    async def proc(job: Any, token: Any) -> None:
        if job.name == "lat":
            raw.rpush("bench:lat", time.time() - job.data["t"])

    w = Worker("bench", proc, {"connection": URL, "concurrency": CONCURRENCY})
    done = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, done.set)
    await done.wait()
    await w.close()


async def main() -> None:
    op, n = op_n()
    if op == "worker":
        await run_worker()
        return
    q = Queue("bench", {"connection": URL})
    if op == "single":
        with Phase() as ph:
            for _ in range(n):
                await q.add("noop", {"p": PAYLOAD})
        emit(ph.result(n, api=API["single"]))
    elif op in ("bulk", "memory", "drain"):
        m0 = raw.info("memory")["used_memory"]
        with Phase() as ph:
            for s in range(0, n, 1000):
                await q.addBulk([{"name": "noop", "data": {"p": PAYLOAD}}
                                 for _ in range(s, min(n, s + 1000))])
        if op == "bulk":
            emit(ph.result(n, api=API["bulk"]))
        elif op == "memory":
            emit(memory_result(n, m0))
        else:
            r = drain(n, lambda: int(raw.llen("bull:bench:wait")) + int(raw.llen("bull:bench:active")),
                      lambda: worker([sys.executable, __file__, "worker", "0", URL]), stop)
            r.update(api=API["worker"], concurrency=CONCURRENCY,
                     fill_server_us=ph.server_cpu / n * 1e6,
                     life_server_us=ph.server_cpu / n * 1e6 + r["server_us"])
            emit(r)
    elif op == "latency":
        with Sampling() as s:
            w = worker([sys.executable, __file__, "worker", "0", URL])
            await awarm_up(lambda: q.add("lat", {"t": time.time()}))
            for _ in range(n):
                await q.add("lat", {"t": time.time()})
                await asyncio.sleep(0.01)
            await asyncio.sleep(1.5)
            stop(w)
        emit(latency_stats(collect_latency()) | {"api": API["worker"], "noise": s.noise})
    await q.close()


if __name__ == "__main__":
    asyncio.run(main())
