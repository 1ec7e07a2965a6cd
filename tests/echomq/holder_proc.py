"""A worker that holds one lease with the plain API, for the SIGSTOP test.

    python -m tests.echomq.holder_proc URL QUEUE LEASE_MS

It claims one job, appends ``held <id> <attempt> <pid>`` to ``testlog:{QUEUE}``, then
heartbeats every LEASE_MS/5. Paused (SIGSTOP) past its lease and resumed, its next
heartbeat finds the lease lost; it then tries, with the same lease, to complete, to
retry and to defer, and prints one JSON line with every answer before exiting.
"""

from __future__ import annotations

import json
import os
import sys
import time

from echomq import Queue, connect


def main() -> None:
    url, name, lease_ms = sys.argv[1], sys.argv[2], int(sys.argv[3])
    conn = connect(url, retry_budget_s=30)
    q = Queue(conn, name)
    give_up = time.monotonic() + 60
    leases = []
    while not leases:
        assert time.monotonic() < give_up, "no job to hold"
        leases = q.claim(1, lease_ms=lease_ms)
        if not leases:
            time.sleep(0.01)  # a poll for the job the test enqueues
    lease = leases[0]
    conn.command("RPUSH", f"testlog:{{{name}}}", f"held {lease.id} {lease.attempt} {os.getpid()}")
    beats = 0
    while q.heartbeat(lease, lease_ms=lease_ms) is not None:
        beats += 1
        time.sleep(lease_ms / 5000)  # the heartbeat cadence, as a consumer's beat_ms
    out = {
        "beats": beats,
        "heartbeat": "lost",
        "complete": q.complete(lease).value,
        "retry": q.retry(lease, delay_ms=0, error="late").value,
        "defer": q.defer(lease, delay_ms=0).value,
    }
    print(json.dumps(out), flush=True)
    conn.close()


if __name__ == "__main__":
    main()
