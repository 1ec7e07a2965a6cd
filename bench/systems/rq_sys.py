"""rq driver: Queue.enqueue, Queue.enqueue_many (one pipeline), `rq worker --burst` (forks per job)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from _common import URL, Phase, collect_latency, drain, emit, latency_stats, op_n, raw, stop, worker

API = {"single": "Queue.enqueue", "bulk": "Queue.enqueue_many (pipeline)",
       "worker": "rq worker --burst (default Worker: fork per job)"}
BIN = os.path.dirname(sys.executable)


def noop(i: int) -> None:
    pass


def lat(t: float) -> None:
    raw.rpush("bench:lat", time.time() - t)


def main() -> None:
    from rq import Queue

    op, n = op_n()
    q = Queue("bench", connection=raw)
    if op == "single":
        with Phase() as ph:
            for i in range(n):
                q.enqueue("rq_sys.noop", i)
        emit(ph.result(n, api=API["single"]))
    elif op in ("bulk", "memory", "drain"):
        data = [Queue.prepare_data("rq_sys.noop", (i,)) for i in range(n)]
        m0 = raw.info("memory")["used_memory"]
        with Phase() as ph:
            q.enqueue_many(data)
        if op == "bulk":
            emit(ph.result(n, api=API["bulk"]))
        elif op == "memory":
            emit({"n": n, "bytes_per_job": (raw.info("memory")["used_memory"] - m0) / n})
        else:
            def finish(p: subprocess.Popen[bytes]) -> None:
                p.wait(600)
            r = drain(n, lambda: q.count + len(q.started_job_registry),
                      lambda: worker([f"{BIN}/rq", "worker", "--burst", "--url", URL, "-q", "bench"]), finish)
            r.update(api=API["worker"], fill_server_us=ph.server_cpu / n * 1e6,
                     life_server_us=ph.server_cpu / n * 1e6 + r["server_us"])
            emit(r)
    elif op == "latency":
        w = worker([f"{BIN}/rq", "worker", "--url", URL, "-q", "bench"])
        time.sleep(2)
        for _ in range(n):
            q.enqueue("rq_sys.lat", time.time())
            time.sleep(0.01)
        time.sleep(1.5)
        stop(w)
        emit(latency_stats(collect_latency()) | {"api": API["worker"]})


if __name__ == "__main__":
    main()
