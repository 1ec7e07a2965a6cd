"""Search's server cost per call and per window at a million jobs (decision 0030).

    python bench/search_cost.py [--jobs 1000000] [--windows 300] [--budget 200]

An embedded Valkey (no AOF) gets one queue of ``--jobs`` jobs, made with the batch path
(``enqueue_many``, 50,000 a call) and moved into every state: 60 % pending (a sixth of
them on 50 lanes), 10 % delayed, 20 % done, 10 % dead (half a ``ValueError``, half a
``KeyError``); payloads of 16 bytes. Then every search below walks up to ``--windows``
windows with the server's SLOWLOG logging every command (threshold 0), and the report
gives, per search, the windows walked, the hits, and the server time of its calls
(EVALSHA of ``search`` and ``search_rows``) as the server measured it: median and worst
per call, worst per window (a window's calls: one ``search``, then ``search_rows`` calls of
at most 32 candidates); then the same windows again with
the SLOWLOG off, for the server main thread's own CPU time per window (``cpu/window``: what
the calls cost the server, without the time other processes took its CPU meanwhile, which
the SLOWLOG's wall times include). INFO commandstats is printed as the cross-check. The
machine's load is printed: on a shared CPU the wall times carry its load.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import redis  # noqa: E402

from echomq import AsyncConnector, AsyncQueue, QueueOptions, generate_many  # noqa: E402
from echomq import protocol as p  # noqa: E402
from echomq.client._async.search import search_window  # noqa: E402
from echomq.core.ids import timestamp_ms  # noqa: E402
from echomq.protocol.search import MAX_BUDGET, SearchQuery  # noqa: E402
from echomq.servers.server import EmbeddedValkey  # noqa: E402

Q = "search-bench"
CHUNK = 50_000


async def fill(conn: AsyncConnector, n: int) -> dict[str, Any]:
    queue = AsyncQueue(conn, Q, options=QueueOptions(max_attempts=1, keep_done_ms=366 * 86_400_000,
                                                     keep_dead_ms=366 * 86_400_000))
    t0 = time.perf_counter()
    done, dead, delayed = n // 5, n // 10, n // 10
    # done and dead first: claimed in admission order, then finished in pipelined batches
    for state, count in (("done", done), ("dead", dead)):
        for start in range(0, count, CHUNK):
            ids = generate_many("JOB", min(CHUNK, count - start))
            await queue.enqueue_many([(i, b"x" * 16) for i in ids])
            left = len(ids)
            while left:
                leases = await queue.claim(min(left, 10_000), lease_ms=3_600_000, window=min(left, 10_000))
                left -= len(leases)
                if state == "done":
                    await queue.complete_many(list(leases))
                else:
                    calls = [p.retry(queue.k, x, delay_ms=0, max_attempts=1, mode="fail",
                                     error=("ValueError: card %d declined\nTraceback (most recent call "
                                            "last):\n  ...\nValueError" if j % 2 else "KeyError: 'order-%d'")
                                     % j) for j, x in enumerate(leases)]
                    for a in range(0, len(calls), 1000):
                        await conn.pipeline(calls[a : a + 1000])
    middle = generate_many("JOB", 1)[0]
    for start in range(0, delayed, CHUNK):
        ids = generate_many("JOB", min(CHUNK, delayed - start))
        calls = [queue.admission.call(i, b"x" * 16, None, 3_600_000, False, None) for i in ids]
        await queue.admission.pipeline(calls, flush=1000)
    pending = n - done - dead - delayed
    laned = pending // 6
    for start in range(0, pending, CHUNK):
        ids = generate_many("JOB", min(CHUNK, pending - start))
        if start < laned:
            await queue.admit_many([(i, b"x" * 16, f"lane-{k % 50}") for k, i in enumerate(ids)])
        else:
            await queue.enqueue_many([(i, b"x" * 16) for i in ids])
    stats = await queue.stats()
    return {"seconds": time.perf_counter() - t0, "stats": stats, "middle": middle}


def searches(middle: str) -> list[tuple[str, SearchQuery]]:
    t = timestamp_ms(middle)
    return [
        ("everything, from the start", SearchQuery()),
        ("pending, lane lane-7", SearchQuery(states=("pending",), lane="lane-7")),
        ("dead, error type ValueError", SearchQuery(states=("dead",), error_type="ValueError")),
        ("dead, text 'card 77'", SearchQuery(states=("dead",), text="card 77")),
        ("done, error KeyError (no match)", SearchQuery(states=("done",), error_type="KeyError")),
        ("delayed, admitted within 5 ms", SearchQuery(states=("delayed",), since_ms=t, until_ms=t + 5)),
        ("delayed, id prefix", SearchQuery(states=("delayed",), id_prefix=middle[:12])),
    ]


async def walk(conn: AsyncConnector, raw: redis.Redis, query: SearchQuery, windows: int,
               budget: int, cursor: str | None = None) -> dict[str, Any]:
    queue = AsyncQueue(conn, Q)
    calls: list[int] = []
    per_window: list[int] = []
    hits = examined = walked = 0
    first = cursor
    while walked < windows:
        raw.slowlog_reset()
        got, cursor, n = await search_window(conn, queue.k, query, cursor, budget)
        log = [e for e in raw.slowlog_get(32) if e["command"].split(b" ")[0].upper() in (b"EVALSHA", b"EVAL")]
        calls += [e["duration"] for e in log]
        per_window.append(sum(e["duration"] for e in log))
        hits += len(got)
        examined += n
        walked += 1
        if cursor is None:
            break
    return {"windows": walked, "hits": hits, "examined": examined, "calls": calls, "per_window": per_window,
            "cpu_us": await cpu_per_window(conn, raw, query, walked, budget, first)}


def _cpu(raw: redis.Redis) -> float:
    info = raw.info("cpu")
    return float(info["used_cpu_user_main_thread"]) + float(info["used_cpu_sys_main_thread"])


async def cpu_per_window(conn: AsyncConnector, raw: redis.Redis, query: SearchQuery, windows: int,
                         budget: int, cursor: str | None) -> float:
    """The same windows again with SLOWLOG off: the server main thread's CPU time per window
    (its own accounting: a share of the CPU lost to other processes does not count)."""
    queue = AsyncQueue(conn, Q)
    raw.config_set("slowlog-log-slower-than", -1)
    try:
        before = _cpu(raw)
        for _ in range(windows):
            _, cursor, _ = await search_window(conn, queue.k, query, cursor, budget)
            if cursor is None:
                break
        return (_cpu(raw) - before) * 1e6 / windows
    finally:
        raw.config_set("slowlog-log-slower-than", 0)


async def reference(conn: AsyncConnector, raw: redis.Redis, name: str) -> float:
    """The server CPU of a call every operator already makes (a PING; the dashboard's page
    of 50 pending jobs, ``browse``): the scale the search figures are read against."""
    queue = AsyncQueue(conn, Q)
    raw.config_set("slowlog-log-slower-than", -1)
    before = _cpu(raw)
    for _ in range(200):
        if name == "PING":
            await conn.command("PING")
        else:
            await queue.browse("pending", offset=10_000, limit=50)
    return (_cpu(raw) - before) * 1e6 / 200


async def vanished(conn: AsyncConnector, raw: redis.Redis, budget: int) -> dict[str, Any]:
    """The cursor's job left pending (cancelled): the next window finds its place among the
    pending jobs of score 0 by binary search."""
    queue = AsyncQueue(conn, Q)
    query = SearchQuery(states=("pending",))
    cursor = None
    half = raw.zcount(queue.k.pending, 0, 0) // 2  # the plain jobs: all of score 0
    for _ in range(max(1, half // 500)):  # into the middle of the plain (score 0) pending jobs
        _, cursor, _ = await search_window(conn, queue.k, query, cursor, 500)
    assert cursor is not None and cursor.split("/")[1] == "0", cursor
    await queue.cancel([cursor.rsplit("/", 1)[1]])
    return await walk(conn, raw, query, 50, budget, cursor=cursor)


async def main_async(args: argparse.Namespace, url: str) -> None:
    conn = AsyncConnector.from_url(url)
    raw = redis.Redis.from_url(url)
    try:
        made = await fill(conn, args.jobs)
        info = raw.info("memory")
        print(f"{args.jobs:,} jobs in {made['seconds']:.0f} s: {made['stats']}; "
              f"used_memory {info['used_memory'] / 2**20:,.0f} MiB")
        raw.config_set("slowlog-log-slower-than", 0)
        raw.config_set("slowlog-max-len", 128)
        raw.config_resetstat()
        load = os.getloadavg()
        print(f"load {load[0]:.2f} {load[1]:.2f}; budget {args.budget} entries a window; server time "
              "per call from SLOWLOG (µs)")
        print(f"{'search':38} {'windows':>7} {'hits':>7} {'examined':>9} {'p50/call':>9} "
              f"{'max/call':>9} {'max/window':>10} {'cpu/window':>10}")
        rows = [(name, await walk(conn, raw, q, args.windows, args.budget))
                for name, q in searches(made["middle"])]
        rows.append(("pending, after a vanished cursor", await vanished(conn, raw, args.budget)))
        rows.append((f"everything, budget {MAX_BUDGET} (the most)",
                     await walk(conn, raw, SearchQuery(), 60, MAX_BUDGET)))
        worst = 0
        for name, r in rows:
            worst = max(worst, max(r["calls"], default=0))
            p50 = statistics.median(r["calls"]) if r["calls"] else 0
            print(f"{name:38} {r['windows']:>7} {r['hits']:>7} {r['examined']:>9,} "
                  f"{p50:>9.0f} {max(r['calls'], default=0):>9} "
                  f"{max(r['per_window'], default=0):>10} {r['cpu_us']:>10.0f}")
        print(f"worst server time of one search call: {worst} µs ({worst / 1000:.2f} ms)")
        refs = [f"{name} {await reference(conn, raw, name):.0f}" for name in ("PING", "browse 50")]
        print("references on the same server, same moment (server CPU per call, µs): " + ", ".join(refs))
        stats = raw.info("commandstats")
        ev = stats.get("cmdstat_evalsha", {})
        print(f"INFO commandstats evalsha: calls {ev.get('calls')}, usec_per_call {ev.get('usec_per_call')}")
    finally:
        raw.close()
        await conn.aclose()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1_000_000)
    ap.add_argument("--windows", type=int, default=300)
    ap.add_argument("--budget", type=int, default=200)
    args = ap.parse_args()
    with EmbeddedValkey(appendonly=False) as server:
        asyncio.run(main_async(args, server.url))


if __name__ == "__main__":
    main()
