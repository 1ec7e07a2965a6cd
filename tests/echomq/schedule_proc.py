"""A scheduler process for the exactly-once-per-tick test (blocking API, no pickle).

    python -m tests.echomq.schedule_proc URL QUEUE EVERY_MS

Runs one catch-up schedule named ``tick`` on QUEUE, prints ``ready`` after its first
pass and ``fired <tick>`` for each tick this process admitted (flushed at once, so a
kill -9 loses at most the line being written); SIGTERM stops it (exit 0).
"""

from __future__ import annotations

import signal
import sys
from types import FrameType

from echomq import Missed, Schedule, Scheduler, connect
from echomq.client._sync.scheduler import Fired


def main() -> None:
    url, queue, every_ms = sys.argv[1], sys.argv[2], int(sys.argv[3])
    conn = connect(url, retry_budget_s=30)
    schedule = Schedule(name="tick", queue=queue, every_ms=every_ms, missed=Missed.CATCH_UP,
                        max_catch_up=10_000)
    sched = Scheduler(conn, [schedule], name=f"child-{every_ms}")

    def stop(signum: int, frame: FrameType | None) -> None:
        sched.stop()

    signal.signal(signal.SIGTERM, stop)
    for fired in sched.tick():
        print("fired", fired[1], flush=True)
    print("ready", flush=True)

    def report(fired: Fired) -> None:
        print("fired", fired[1], flush=True)

    sched.run(on_admit=report)
    conn.close()


if __name__ == "__main__":
    main()
