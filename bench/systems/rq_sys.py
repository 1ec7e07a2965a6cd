"""rq driver: Queue.enqueue, Queue.enqueue_many (one pipeline; prepare_data inside the
timed window), `rq worker --burst -w rq.worker.SimpleWorker` (rq's documented worker that
runs jobs in its own process instead of forking per job: its fastest path)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from _common import PAYLOAD, URL, Phase, drain, emit, latency_run, memory_result, op_n, raw, worker

API = {"single": "Queue.enqueue", "bulk": "Queue.enqueue_many (pipeline)",
       "worker": "rq worker --burst -w rq.worker.SimpleWorker (no fork per job)"}
BIN = os.path.dirname(sys.executable)


def noop(p: str) -> None:
    pass


def lat(t: float) -> None:
    raw.rpush("bench:lat", time.time() - t)


def main() -> None:
    from rq import Queue

    op, n = op_n()
    q = Queue("bench", connection=raw)
    cmd = [f"{BIN}/rq", "worker", "-w", "rq.worker.SimpleWorker", "--url", URL, "-q", "bench"]
    if op == "single":
        with Phase() as ph:
            for _ in range(n):
                q.enqueue("rq_sys.noop", PAYLOAD)
        emit(ph.result(n, api=API["single"]))
    elif op in ("bulk", "memory", "drain"):
        m0 = raw.info("memory")["used_memory"]
        with Phase() as ph:
            q.enqueue_many([Queue.prepare_data("rq_sys.noop", (PAYLOAD,)) for _ in range(n)])
        if op == "bulk":
            emit(ph.result(n, api=API["bulk"]))
        elif op == "memory":
            emit(memory_result(n, m0))
        else:
            def finish(p: subprocess.Popen[bytes]) -> None:
                p.wait(600)
            r = drain(n, lambda: q.count + len(q.started_job_registry),
                      lambda: worker([*cmd, "--burst"]), finish)
            r.update(api=API["worker"], concurrency=1,
                     fill_server_us=ph.server_cpu / n * 1e6,
                     life_server_us=ph.server_cpu / n * 1e6 + r["server_us"])
            emit(r)
    elif op == "latency":
        emit(latency_run(n, lambda: q.enqueue("rq_sys.lat", time.time()), lambda: worker(cmd), 1.5)
             | {"api": API["worker"]})


if __name__ == "__main__":
    main()
