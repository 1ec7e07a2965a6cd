"""dramatiq driver: actor.send, group(...).run(), `dramatiq --processes 1` (default 8 threads)."""

from __future__ import annotations

import os
import sys
import time

import dramatiq
from _common import URL, Phase, collect_latency, drain, emit, latency_stats, op_n, raw, stop, worker
from dramatiq.brokers.redis import RedisBroker

API = {"single": "actor.send", "bulk": "group(messages).run() in chunks of 1000",
       "worker": "dramatiq --processes 1 (defaults: 8 threads)"}
BIN = os.path.dirname(sys.executable)
dramatiq.set_broker(RedisBroker(url=os.environ.get("BENCH_URL", URL)))


@dramatiq.actor(queue_name="bench")
def noop(i: int) -> None:
    pass


@dramatiq.actor(queue_name="bench")
def lat(t: float) -> None:
    raw.rpush("bench:lat", time.time() - t)


def main() -> None:
    op, n = op_n()
    cmd = [f"{BIN}/dramatiq", "dramatiq_sys", "--processes", "1", "--queues", "bench"]
    if op == "single":
        with Phase() as ph:
            for i in range(n):
                noop.send(i)
        emit(ph.result(n, api=API["single"]))
    elif op in ("bulk", "memory", "drain"):
        m0 = raw.info("memory")["used_memory"]
        with Phase() as ph:
            for s in range(0, n, 1000):
                dramatiq.group(noop.message(i) for i in range(s, min(n, s + 1000))).run()
        if op == "bulk":
            emit(ph.result(n, api=API["bulk"]))
        elif op == "memory":
            emit({"n": n, "bytes_per_job": (raw.info("memory")["used_memory"] - m0) / n})
        else:
            r = drain(n, lambda: int(raw.hlen("dramatiq:bench.msgs")), lambda: worker(cmd), stop)
            r.update(api=API["worker"], fill_server_us=ph.server_cpu / n * 1e6,
                     life_server_us=ph.server_cpu / n * 1e6 + r["server_us"])
            emit(r)
    elif op == "latency":
        w = worker(cmd)
        time.sleep(3)
        for _ in range(n):
            lat.send(time.time())
            time.sleep(0.01)
        time.sleep(1.5)
        stop(w)
        emit(latency_stats(collect_latency()) | {"api": API["worker"]})


if __name__ == "__main__":
    main()
