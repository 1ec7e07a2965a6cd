"""taskiq + taskiq-redis driver: ListQueueBroker, task.kiq; no bulk API (gather of kiq);
`taskiq worker --workers 1`."""

from __future__ import annotations

import asyncio
import os
import sys
import time

from _common import URL, Phase, collect_latency, drain, emit, latency_stats, op_n, raw, stop, worker
from taskiq_redis import ListQueueBroker

API = {"single": "task.kiq (ListQueueBroker)", "bulk": "asyncio.gather(task.kiq) in chunks of 1000",
       "worker": "taskiq worker --workers 1 (defaults otherwise)"}
BIN = os.path.dirname(sys.executable)
broker = ListQueueBroker(os.environ.get("BENCH_URL", URL), queue_name="bench")


@broker.task
async def noop(i: int) -> None:
    pass


@broker.task
async def lat(t: float) -> None:
    raw.rpush("bench:lat", time.time() - t)


async def main() -> None:
    op, n = op_n()
    await broker.startup()
    if op == "single":
        with Phase() as ph:
            for i in range(n):
                await noop.kiq(i)
        emit(ph.result(n, api=API["single"]))
    elif op in ("bulk", "memory", "drain"):
        m0 = raw.info("memory")["used_memory"]
        with Phase() as ph:
            for s in range(0, n, 1000):
                await asyncio.gather(*(noop.kiq(i) for i in range(s, min(n, s + 1000))))
        if op == "bulk":
            emit(ph.result(n, api=API["bulk"]))
        elif op == "memory":
            emit({"n": n, "bytes_per_job": (raw.info("memory")["used_memory"] - m0) / n})
        else:
            r = drain(n, lambda: int(raw.llen("bench")),
                      lambda: worker([f"{BIN}/taskiq", "worker", "taskiq_sys:broker", "--workers", "1"]),
                      stop)
            r.update(api=API["worker"], fill_server_us=ph.server_cpu / n * 1e6,
                     life_server_us=ph.server_cpu / n * 1e6 + r["server_us"])
            emit(r)
    elif op == "latency":
        w = worker([f"{BIN}/taskiq", "worker", "taskiq_sys:broker", "--workers", "1"])
        await asyncio.sleep(3)
        for _ in range(n):
            await lat.kiq(time.time())
            await asyncio.sleep(0.01)
        await asyncio.sleep(1.5)
        stop(w)
        emit(latency_stats(collect_latency()) | {"api": API["worker"]})
    await broker.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
