"""EchoMQ driver: enqueue (single), enqueue_many (bulk), a Consumer process with defaults."""

from __future__ import annotations

import asyncio
import sys
import time

from _common import URL, Phase, collect_latency, drain, emit, latency_stats, op_n, raw, stop, worker

from echomq import AsyncConnector, AsyncQueue, generate
from echomq.consumer import Consumer

Q = "bench"
API = {"single": "AsyncQueue.enqueue", "bulk": "AsyncQueue.enqueue_many",
       "worker": "Consumer (defaults: concurrency 32, beat 100 ms)"}


def pairs(n: int) -> list[tuple[str, bytes]]:
    return [(generate("JOB"), b"%d" % i) for i in range(n)]


async def run_worker(lat: bool) -> None:
    queue = AsyncQueue(AsyncConnector.from_url(URL), Q)

    def handler(lease: object) -> None:
        if lat:
            raw.rpush("bench:lat", time.time() - float(lease.payload))  # type: ignore[attr-defined]

    consumer = Consumer(queue, handler)
    await consumer.run()


async def main() -> None:
    op, n = op_n()
    if op in ("worker", "worker-lat"):
        await run_worker(op == "worker-lat")
        return
    c = AsyncConnector.from_url(URL)
    q = AsyncQueue(c, Q)
    await q.enqueue_many(pairs(10))  # warm: fence, script cache, connections
    raw.delete(*raw.keys("emq:*"))
    if op == "single":
        items = pairs(n)
        with Phase() as ph:
            for i, p in items:
                await q.enqueue(i, p)
        emit(ph.result(n, api=API["single"]))
    elif op == "bulk":
        items = pairs(n)
        with Phase() as ph:
            await q.enqueue_many(items)
        emit(ph.result(n, api=API["bulk"]))
    elif op == "memory":
        items = pairs(n)
        m0 = raw.info("memory")["used_memory"]
        await q.enqueue_many(items)
        emit({"n": n, "bytes_per_job": (raw.info("memory")["used_memory"] - m0) / n})
    elif op == "drain":
        items = pairs(n)
        with Phase() as fill:
            await q.enqueue_many(items)
        r = drain(n, lambda: int(raw.zcard(f"emq:{{{Q}}}:pending")) + int(raw.zcard(f"emq:{{{Q}}}:active")),
                  lambda: worker([sys.executable, __file__, "worker", "0", URL]), stop)
        r.update(api=API["worker"], fill_server_us=fill.server_cpu / n * 1e6,
                 life_server_us=fill.server_cpu / n * 1e6 + r["server_us"])
        emit(r)
    elif op == "latency":
        w = worker([sys.executable, __file__, "worker-lat", "0", URL])
        await asyncio.sleep(1.5)
        for _ in range(n):
            await q.enqueue(generate("JOB"), repr(time.time()).encode())
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.5)
        stop(w)
        emit(latency_stats(collect_latency()) | {"api": API["worker"]})
    await c.aclose()


if __name__ == "__main__":
    asyncio.run(main())
