"""celery driver: task.delay, group(...).apply_async(), `celery worker -P solo` (one process)."""

from __future__ import annotations

import os
import sys
import time

from _common import (
    PAYLOAD,
    URL,
    Phase,
    Sampling,
    collect_latency,
    conc,
    drain,
    emit,
    latency_stats,
    memory_result,
    op_n,
    raw,
    stop,
    warm_up,
    worker,
)
from celery import Celery, group

API = {"single": "task.delay", "bulk": "group(signatures).apply_async() in chunks of 1000",
       "worker": "celery worker -P solo (one process; defaults otherwise)"}
CONCURRENCY = conc(1)
if CONCURRENCY != 1:  # the in-process pool; events the drain does not need off, as celery documents
    API["worker"] = (f"celery worker -P threads -c {CONCURRENCY} --without-gossip --without-mingle "
                     "--without-heartbeat (one process)")
BIN = os.path.dirname(sys.executable)
app = Celery("celery_sys", broker=os.environ.get("BENCH_URL", URL))
app.conf.task_default_queue = "bench"


@app.task
def noop(p: str) -> None:
    pass


@app.task
def lat(t: float) -> None:
    raw.rpush("bench:lat", time.time() - t)


def main() -> None:
    op, n = op_n()
    cmd = [f"{BIN}/celery", "-A", "celery_sys", "worker", "-P", "solo", "-Q", "bench",
           "--loglevel", "WARNING"]
    if CONCURRENCY != 1:
        cmd[5:6] = ["threads", "-c", str(CONCURRENCY), "--without-gossip", "--without-mingle",
                    "--without-heartbeat"]
    noop.delay(0)  # warm the connection and declare the queue
    raw.delete("bench")
    if op == "single":
        with Phase() as ph:
            for _ in range(n):
                noop.delay(PAYLOAD)
        emit(ph.result(n, api=API["single"]))
    elif op in ("bulk", "memory", "drain"):
        m0 = raw.info("memory")["used_memory"]
        with Phase() as ph:
            for s in range(0, n, 1000):
                group(noop.s(PAYLOAD) for _ in range(s, min(n, s + 1000))).apply_async()
        if op == "bulk":
            emit(ph.result(n, api=API["bulk"]))
        elif op == "memory":
            emit(memory_result(n, m0))
        else:
            r = drain(n, lambda: int(raw.llen("bench")) + int(raw.hlen("unacked")), lambda: worker(cmd), stop)
            r.update(api=API["worker"], concurrency=CONCURRENCY,
                     fill_server_us=ph.server_cpu / n * 1e6,
                     life_server_us=ph.server_cpu / n * 1e6 + r["server_us"])
            emit(r)
    elif op == "latency":
        with Sampling() as s:
            w = worker(cmd)
            warm_up(lambda: lat.delay(time.time()))
            for _ in range(n):
                lat.delay(time.time())
                time.sleep(0.01)
            time.sleep(1.5)
            stop(w)
        emit(latency_stats(collect_latency()) | {"api": API["worker"], "noise": s.noise})


if __name__ == "__main__":
    main()
