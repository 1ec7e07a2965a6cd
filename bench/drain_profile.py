"""Which server commands a default Consumer's drain sends per job (issue 15 item 5).

    .venv/bin/python bench/drain_profile.py [--jobs 5000] [--async-handler] [--cprofile FILE]

One fresh embedded Valkey; N jobs admitted, ``INFO commandstats`` reset, then a Consumer
with default options drains them (a blocking no-op handler, as the benchmark's drain row,
or an async one). Prints the rate, the server CPU per job (``INFO cpu``) and, per command,
calls and µs per job: ``evalsha`` is the scripts' whole time, the commands they ran are
listed under their own names too, so the difference is time spent in Lua itself.

The client line is this process's own CPU (``resource.getrusage(RUSAGE_SELF)``: user +
system of every thread, handler threads included; the server is another process) over
the same window, per job: robust on a shared machine where the wall-clock rate is not.
It includes the probe's own poll of ``stats()`` every 10 ms (about 100 calls a second).
``--cprofile FILE`` writes a cProfile of the loop thread over the drain (slower: compare
profiles with each other, not with the rates).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import resource
import time

import redis

from echomq import AsyncConnector, AsyncQueue, Consumer, ConsumerOptions, Lease, generate_many
from echomq.servers.server import EmbeddedValkey


def client_cpu() -> float:
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def client_split() -> tuple[float, float, int]:
    """User and system CPU seconds and context switches (voluntary + not) of this process."""
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime, u.ru_stime, u.ru_nvcsw + u.ru_nivcsw


def server_cpu(r: redis.Redis) -> float:
    i = r.info("cpu")
    return float(i["used_cpu_sys"]) + float(i["used_cpu_user"])


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=5000)
    ap.add_argument("--async-handler", action="store_true")
    ap.add_argument("--cprofile", metavar="FILE")
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--pin", action="store_true", help="server on CPU 0, this process on CPU 1")
    a = ap.parse_args()
    n = a.jobs
    with EmbeddedValkey() as s:
        if a.pin:  # as bench/run.sh: the server on CPU 0, this process (loop, threads) on CPU 1
            os.sched_setaffinity(s.pid or 0, {0})
            os.sched_setaffinity(0, {1})
        raw = redis.Redis.from_url(s.url)
        q = AsyncQueue(AsyncConnector.from_url(s.url), "drain")
        await q.enqueue_many([(i, b"x" * 64) for i in generate_many("JOB", n)])
        raw.config_resetstat()
        prof = cProfile.Profile() if a.cprofile else None
        c0, k0, t0 = server_cpu(raw), client_cpu(), time.monotonic()
        split0 = client_split()

        async def async_handler(lease: Lease) -> None:
            return None

        def blocking_handler(lease: Lease) -> None:
            return None

        consumer = Consumer(q, async_handler if a.async_handler else blocking_handler,
                            options=ConsumerOptions(concurrency=a.concurrency))
        if prof is not None:
            prof.enable()
        task = asyncio.create_task(consumer.run())
        while (await q.stats()).done < n:  # noqa: ASYNC110 (the server says when all are done)
            await asyncio.sleep(0.01)
        wall, kcpu = time.monotonic() - t0, client_cpu() - k0
        split = [b - a for a, b in zip(split0, client_split(), strict=True)]
        if prof is not None:
            prof.disable()
            prof.dump_stats(a.cprofile)
        cpu, stats = server_cpu(raw) - c0, raw.info("commandstats")
        consumer.stop()
        await task
    kind = ("async" if a.async_handler else "blocking") + f", concurrency {a.concurrency}"
    print(f"{n} jobs, {kind} handler: {n / wall:,.0f}/s, server {cpu / n * 1e6:.1f} µs/job, "
          f"client {kcpu / n * 1e6:.1f} µs/job ({kcpu / wall:.2f} of a core), "
          f"{stats_line(consumer)}")
    print(f"client user {split[0] / n * 1e6:.1f} µs/job, system {split[1] / n * 1e6:.1f} µs/job, "
          f"{split[2] / n:.2f} context switches/job")
    for name, v in sorted(stats.items(), key=lambda kv: -kv[1]["usec"])[:15]:
        print(f"{name.removeprefix('cmdstat_'):20s} calls/job {v['calls'] / n:7.3f}  "
              f"µs/job {v['usec'] / n:7.2f}  µs/call {v['usec_per_call']:.2f}")


def stats_line(consumer: Consumer) -> str:
    s = consumer.stats
    return f"claimed {s.claimed}, completed {s.completed}, handed off {s.handed_off}"


if __name__ == "__main__":
    asyncio.run(main())
