"""saq driver: Queue.enqueue; no bulk API (asyncio.gather of enqueue); a Worker process (burst)."""

from __future__ import annotations

import asyncio
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
from saq import Queue, Worker

API = {"single": "Queue.enqueue", "bulk": "asyncio.gather(Queue.enqueue) in chunks of 1000",
       "worker": "Worker (defaults: concurrency 10), burst=True, dequeue_timeout=1"}
CONCURRENCY = conc(10)
if CONCURRENCY != 10:
    API["worker"] = f"Worker (concurrency {CONCURRENCY}), burst=True, dequeue_timeout=1"


async def noop(ctx: Any, *, p: str) -> None:
    pass


async def lat(ctx: Any, *, t: float) -> None:
    raw.rpush("bench:lat", time.time() - t)


async def main() -> None:
    op, n = op_n()
    q = Queue.from_url(URL, name="bench")
    await q.connect()
    if op in ("worker", "worker-burst"):
        await Worker(q, functions=[noop, lat], burst=op == "worker-burst", concurrency=CONCURRENCY,
                     dequeue_timeout=1 if op == "worker-burst" else 0).start()
        return
    if op == "single":
        with Phase() as ph:
            for _ in range(n):
                await q.enqueue("noop", p=PAYLOAD)
        emit(ph.result(n, api=API["single"]))
    elif op in ("bulk", "memory", "drain"):
        m0 = raw.info("memory")["used_memory"]
        with Phase() as ph:
            for s in range(0, n, 1000):
                await asyncio.gather(*(q.enqueue("noop", p=PAYLOAD) for _ in range(s, min(n, s + 1000))))
        if op == "bulk":
            emit(ph.result(n, api=API["bulk"]))
        elif op == "memory":
            emit(memory_result(n, m0))
        else:
            def finish(p: Any) -> None:
                p.wait(600)
            r = drain(n, lambda: int(raw.llen("saq:bench:queued")) + int(raw.llen("saq:bench:active")),
                      lambda: worker([sys.executable, __file__, "worker-burst", "0", URL]), finish)
            r.update(api=API["worker"], concurrency=CONCURRENCY,
                     fill_server_us=ph.server_cpu / n * 1e6,
                     life_server_us=ph.server_cpu / n * 1e6 + r["server_us"])
            emit(r)
    elif op == "latency":
        with Sampling() as s:
            w = worker([sys.executable, __file__, "worker", "0", URL])
            await awarm_up(lambda: q.enqueue("lat", t=time.time()))
            for _ in range(n):
                await q.enqueue("lat", t=time.time())
                await asyncio.sleep(0.01)
            await asyncio.sleep(1.5)
            stop(w)
        emit(latency_stats(collect_latency()) | {"api": API["worker"], "noise": s.noise})
    await q.disconnect()


if __name__ == "__main__":
    asyncio.run(main())
