"""dramatiq driver: actor.send (single, and bulk_send: send in a loop), group(...).run()
(bulk), `dramatiq --processes 1` (default 8 threads)."""

from __future__ import annotations

import os
import sys
import time

import dramatiq
from _common import (
    PAYLOAD,
    URL,
    Phase,
    conc,
    drain,
    emit,
    latency_run,
    memory_result,
    op_n,
    raw,
    stop,
    worker,
)
from dramatiq.brokers.redis import RedisBroker

API = {"single": "actor.send", "bulk": "group(messages).run() in chunks of 1000",
       "bulk_send": "actor.send in a loop", "worker": "dramatiq --processes 1 (defaults: 8 threads)"}
CONCURRENCY = conc(8)
if CONCURRENCY != 8:
    API["worker"] = f"dramatiq --processes 1 --threads {CONCURRENCY}"
BIN = os.path.dirname(sys.executable)
dramatiq.set_broker(RedisBroker(url=os.environ.get("BENCH_URL", URL)))


@dramatiq.actor(queue_name="bench")
def noop(p: str) -> None:
    pass


@dramatiq.actor(queue_name="bench")
def lat(t: float) -> None:
    raw.rpush("bench:lat", time.time() - t)


def main() -> None:
    op, n = op_n()
    cmd = [f"{BIN}/dramatiq", "dramatiq_sys", "--processes", "1", "--threads", str(CONCURRENCY),
           "--queues", "bench"]
    if op in ("single", "bulk_send"):
        with Phase() as ph:
            for _ in range(n):
                noop.send(PAYLOAD)
        emit(ph.result(n, api=API[op]))
    elif op in ("bulk", "memory", "drain"):
        m0 = raw.info("memory")["used_memory"]
        with Phase() as ph:
            for s in range(0, n, 1000):
                dramatiq.group(noop.message(PAYLOAD) for _ in range(s, min(n, s + 1000))).run()
        if op == "bulk":
            emit(ph.result(n, api=API["bulk"]))
        elif op == "memory":
            emit(memory_result(n, m0))
        else:
            r = drain(n, lambda: int(raw.hlen("dramatiq:bench.msgs")), lambda: worker(cmd), stop)
            r.update(api=API["worker"], concurrency=CONCURRENCY,
                     fill_server_us=ph.server_cpu / n * 1e6,
                     life_server_us=ph.server_cpu / n * 1e6 + r["server_us"])
            emit(r)
    elif op == "latency":
        emit(latency_run(n, lambda: lat.send(time.time()), lambda: worker(cmd), 1.5)
             | {"api": API["worker"]})


if __name__ == "__main__":
    main()
