"""taskiq + taskiq-redis driver, both brokers: ListQueueBroker (BENCH_TASKIQ=list) and
RedisStreamBroker (BENCH_TASKIQ=stream, acknowledged consumer groups). task.kiq; no bulk
API (asyncio.gather of kiq in chunks of 1000); `taskiq worker --workers 1`."""

from __future__ import annotations

import asyncio
import os
import sys
import time

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
from taskiq_redis import ListQueueBroker, RedisStreamBroker

KIND = os.environ.get("BENCH_TASKIQ", "list")
CHUNK = 250
NAME = {"list": "ListQueueBroker", "stream": "RedisStreamBroker"}[KIND]
API = {"single": f"task.kiq ({NAME})",
       "bulk": f"asyncio.gather(task.kiq) in chunks of {CHUNK} ({NAME})",
       "worker": f"taskiq worker --workers 1 ({NAME}, defaults otherwise)"}
BIN = os.path.dirname(sys.executable)
CONCURRENCY = conc(100)
if CONCURRENCY != 100:  # and as many deliveries prefetched beyond them (taskiq's --max-prefetch)
    API["worker"] = (f"taskiq worker --workers 1 --max-async-tasks {CONCURRENCY} --max-prefetch "
                     f"{CONCURRENCY} ({NAME})")
# (CHUNK: 1,000, and on a busy machine 500, concurrent kiq calls fail with SendTaskError,
# a connection each from the broker's pool; 250 at a time worked for both brokers.)
_url = os.environ.get("BENCH_URL", URL)
broker = (ListQueueBroker(_url, queue_name="bench") if KIND == "list"
          else RedisStreamBroker(_url, queue_name="bench"))


@broker.task
async def noop(p: str) -> None:
    pass


@broker.task
async def lat(t: float) -> None:
    raw.rpush("bench:lat", time.time() - t)


def backlog() -> int:
    if KIND == "list":
        return int(raw.llen("bench"))
    # Stream: entries not yet delivered to the group plus delivered but unacknowledged.
    groups = raw.xinfo_groups("bench") if raw.exists("bench") else []
    if not groups:
        return int(raw.xlen("bench")) if raw.exists("bench") else 0
    g = groups[0]
    lag = g.get("lag")
    if lag is None:
        lag = int(raw.xlen("bench"))
    return int(lag) + int(g.get("pending", 0))


async def main() -> None:
    op, n = op_n()
    await broker.startup()
    cmd = [f"{BIN}/taskiq", "worker", "taskiq_sys:broker", "--workers", "1"]
    if CONCURRENCY != 100:
        cmd += ["--max-async-tasks", str(CONCURRENCY), "--max-prefetch", str(CONCURRENCY)]
    if op == "single":
        with Phase() as ph:
            for _ in range(n):
                await noop.kiq(PAYLOAD)
        emit(ph.result(n, api=API["single"]))
    elif op in ("bulk", "memory", "drain"):
        m0 = raw.info("memory")["used_memory"]
        with Phase() as ph:
            for s in range(0, n, CHUNK):
                await asyncio.gather(*(noop.kiq(PAYLOAD) for _ in range(s, min(n, s + CHUNK))))
        if op == "bulk":
            emit(ph.result(n, api=API["bulk"]))
        elif op == "memory":
            emit(memory_result(n, m0))
        else:
            r = drain(n, backlog, lambda: worker(cmd), stop)
            r.update(api=API["worker"], concurrency=CONCURRENCY,
                     fill_server_us=ph.server_cpu / n * 1e6,
                     life_server_us=ph.server_cpu / n * 1e6 + r["server_us"])
            emit(r)
    elif op == "latency":
        with Sampling() as s:
            w = worker(cmd)
            await awarm_up(lambda: lat.kiq(time.time()))
            for _ in range(n):
                await lat.kiq(time.time())
                await asyncio.sleep(0.01)
            await asyncio.sleep(1.5)
            stop(w)
        emit(latency_stats(collect_latency()) | {"api": API["worker"], "noise": s.noise})
    await broker.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
