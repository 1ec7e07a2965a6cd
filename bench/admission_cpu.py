"""Client CPU per admitted job through the public API, on a local embedded server.

    PYTHONPATH=src .venv/bin/python bench/admission_cpu.py [bulk seq producer] [-n 50000]
        [--reps 3] [--profile MODE]

Modes (ids minted inside the timed window, 64-byte payloads, from an empty queue):
``bulk`` one ``enqueue_many`` call of N (``generate_many`` ids), ``seq`` sequential
``enqueue_many`` calls of 1,000, ``producer`` ``Producer.put`` one by one (``generate``
per id). Prints, per mode, the best of ``--reps`` runs by client CPU: this process's
CPU time per job (``time.process_time``: user + system, robust on a shared machine), the
rate (wall: only indicative when other processes load the machine), the server's CPU
per job (``INFO cpu``) and the client's system share. ``--profile MODE`` prints a cProfile
of one run of MODE. A component measurement for issue 15, not a row of the full run
(``bench/run.sh``): no pinning, no noise record.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import time
from collections.abc import Awaitable, Callable

import redis

from echomq import AsyncConnector, AsyncQueue, Producer, Verdict, generate, generate_many
from echomq.servers.server import EmbeddedValkey

PAYLOAD = b"x" * 64


def server_cpu(r: redis.Redis) -> float:
    info = r.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


async def bulk(q: AsyncQueue, n: int) -> None:
    verdicts = await q.enqueue_many([(i, PAYLOAD) for i in generate_many("JOB", n)])
    if sum(v is Verdict.ENQUEUED for v in verdicts) != n:
        raise SystemExit("bulk: not every job was ENQUEUED")


async def seq(q: AsyncQueue, n: int) -> None:
    got = 0
    for s in range(0, n, 1000):
        verdicts = await q.enqueue_many([(i, PAYLOAD) for i in generate_many("JOB", min(1000, n - s))])
        got += sum(v is Verdict.ENQUEUED for v in verdicts)
    if got != n:
        raise SystemExit("seq: not every job was ENQUEUED")


async def producer(q: AsyncQueue, n: int) -> None:
    futures = []
    async with Producer(q) as p:
        for _ in range(n):
            futures.append(await p.put(generate("JOB"), PAYLOAD))
    if sum(f.result() is Verdict.ENQUEUED for f in futures) != n:
        raise SystemExit("producer: not every job was ENQUEUED")


MODES: dict[str, Callable[[AsyncQueue, int], Awaitable[None]]] = {
    "bulk": bulk, "seq": seq, "producer": producer}


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("modes", nargs="*", default=list(MODES), help=" ".join(MODES))
    ap.add_argument("-n", type=int, default=50_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--profile", default="", choices=["", *MODES])
    a = ap.parse_args()
    if not set(a.modes) <= set(MODES):
        ap.error(f"modes are {', '.join(MODES)}")
    srv = EmbeddedValkey(appendonly=False)
    srv.start()
    try:
        r = redis.Redis.from_url(srv.url)
        conn = AsyncConnector.from_url(srv.url)
        q = AsyncQueue(conn, "bench")
        await q.enqueue_many([(generate("JOB"), b"warm") for _ in range(10)])  # scripts, connections
        for mode in a.modes:
            best: tuple[float, float, float, float] | None = None
            for _ in range(a.reps):
                r.flushall()
                s0, t0, c0, w0 = server_cpu(r), os.times(), time.process_time(), time.perf_counter()
                prof = cProfile.Profile() if a.profile == mode else None
                if prof is not None:
                    prof.enable()
                await MODES[mode](q, a.n)
                if prof is not None:
                    prof.disable()
                wall, cpu, t1 = time.perf_counter() - w0, time.process_time() - c0, os.times()
                row = (cpu / a.n * 1e6, a.n / wall, (server_cpu(r) - s0) / a.n * 1e6,
                       (t1.system - t0.system) / a.n * 1e6)
                best = row if best is None or row[0] < best[0] else best
                if prof is not None:
                    pstats.Stats(prof).sort_stats("tottime").print_stats(25)
            assert best is not None
            print(f"{mode:9s} client {best[0]:6.2f} µs/job (system {best[3]:5.2f})  rate {best[1]:9,.0f}/s  "
                  f"server {best[2]:6.2f} µs/job  (load {os.getloadavg()[0]:.1f})", flush=True)
        await conn.aclose()
        r.close()
    finally:
        srv.stop()


if __name__ == "__main__":
    asyncio.run(main())
