"""Instructions per search window, counted by callgrind: search's cost free of the machine's load.

    .venv/bin/python bench/search_ir.py [--jobs 100000] [--windows 20]

``bench/search_cost.py`` measures wall and CPU time, both of which carry the load of a
shared machine. An instruction count does not (decision 0028 prices the claim plane the
same way, and measured an instruction of this server's script work at ~0.6 ns on a quiet
machine). This runs the embedded wheel's ``valkey-server`` under ``valgrind
--tool=callgrind`` (``--hz 1``), fills it as ``bench/search_cost.py`` does (``--jobs``,
every state), then for each search zeroes the counters, runs ``--windows`` windows of 200
(and of 500, the most), dumps, and prints the server's instructions per window and per
call, with the time they would take at 0.6 ns each (an estimate, not a measurement). A
window's work is O(log n + budget), so ``--jobs`` changes the figures by the log only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))


from callgrind import CallgrindValkey  # noqa: E402
from echomq import AsyncConnector, AsyncQueue  # noqa: E402
from echomq.client._async.search import search_window  # noqa: E402
from echomq.protocol.search import MAX_BUDGET, SearchQuery  # noqa: E402
from search_cost import Q, fill, searches  # noqa: E402

NS_PER_IR = 0.6  # decision 0028: claim at batch 32, ~58k Ir/job measured at ~34 µs/job, quiet


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--windows", type=int, default=20)
    ap.add_argument("--budget", type=int, default=200)
    a = ap.parse_args()
    srv = CallgrindValkey("search_ir", port=18000 + os.getpid() % 1000)
    url, r, ctl, total = srv.url, srv.client, srv.ctl, srv.total

    async def run(query: SearchQuery, budget: int) -> int:
        """Windows walked between zeroing the counters and dumping them (the connection is
        made and warmed before, so only the windows are counted)."""
        conn = AsyncConnector.from_url(url, retry_budget_s=900, socket_timeout=900)
        k = AsyncQueue(conn, Q).k
        cursor: str | None = None
        windows = 0
        try:
            await conn.command("PING")
            await asyncio.sleep(0.3)
            await asyncio.to_thread(ctl, "-z")
            for _ in range(a.windows):
                _, cursor, _ = await search_window(conn, k, query, cursor, budget)
                windows += 1
                if cursor is None:
                    break
            await asyncio.to_thread(ctl, "-d")
            await asyncio.sleep(0.5)
        finally:
            await conn.aclose()
        return windows

    with srv:
        srv.wait_ready(120)

        async def filled() -> dict[str, object]:
            conn = AsyncConnector.from_url(url, retry_budget_s=900, socket_timeout=900)
            try:
                return await fill(conn, a.jobs)
            finally:
                await conn.aclose()

        t0 = time.monotonic()
        made = asyncio.run(filled())
        print(f"{a.jobs:,} jobs under callgrind in {time.monotonic() - t0:.0f} s: {made['stats']}")
        cases = [(name, q, a.budget) for name, q in searches(str(made["middle"]))]
        cases.append(("the window script alone (no candidate)", SearchQuery(id_prefix="JOBZZ"), a.budget))
        cases.append((f"everything, windows of {MAX_BUDGET}", SearchQuery(), MAX_BUDGET))
        print(f"{'search':40} {'budget':>6} {'windows':>7} {'Ir/window':>11} {'est. µs/window':>14}")
        for name, query, budget in cases:
            windows = asyncio.run(run(query, budget))
            per = total() / windows
            print(f"{name:40} {budget:>6} {windows:>7} {per:>11,.0f} {per * NS_PER_IR / 1000:>14.0f}")
        time.sleep(0.3)
        ctl("-z")
        for _ in range(200):
            r.ping()
        ctl("-d")
        time.sleep(0.5)
        print(f"reference: PING {total() / 200:,.0f} Ir")


if __name__ == "__main__":
    main()
