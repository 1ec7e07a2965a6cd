"""What the process pool costs (decision 0035): a child's start, and one attempt on a warm child.

    .venv/bin/python bench/process_pool.py [--starts 10] [--attempts 200]

Each round starts one child of ``tests.echomq.pool_targets:pid`` (the time from the spawn
to its "ready" frame: a Python start and the handler's import), then runs ``--attempts``
attempts of a no-op handler on it (the pipe round trip, framing and the child's call).
No server: the pool alone. Prints medians and the load average, which moves both.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' handler module

from echomq.core.model import Lease
from echomq.runtime.process_pool import ProcessPool


async def main(starts: int, attempts: int) -> None:
    took, each = [], []
    lease = Lease(queue="q", id="JOB1", attempt=1, payload=b"", lane=None, deadline_ms=0)
    for _ in range(starts):
        pool = ProcessPool("tests.echomq.pool_targets:pid", size=1, kill_grace_s=1.0, name="bench")
        t = time.perf_counter()
        await pool.run(lease)  # the first attempt starts the child
        took.append(time.perf_counter() - t)
        t = time.perf_counter()
        for _ in range(attempts):
            await pool.run(lease)
        each.append((time.perf_counter() - t) / attempts)
        await pool.aclose()
    print(f"child start + first attempt: median {statistics.median(took) * 1000:.0f} ms "
          f"(min {min(took) * 1000:.0f}, max {max(took) * 1000:.0f}, {starts} starts); "
          f"an attempt on a warm child: median {statistics.median(each) * 1e6:.0f} µs; "
          f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--starts", type=int, default=10)
    ap.add_argument("--attempts", type=int, default=200)
    a = ap.parse_args()
    asyncio.run(main(a.starts, a.attempts))
