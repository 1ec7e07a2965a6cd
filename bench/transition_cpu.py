"""Server CPU per job of the claim and the complete transitions, by batch size (issue 15 item 5).

    .venv/bin/python bench/transition_cpu.py [--jobs 20000] [--batches 8,32,256] [--payload 64]

One fresh embedded Valkey pinned to CPU 0, this client on CPU 1. For each batch size b,
N jobs are admitted (``enqueue_many``, not measured), then drained in rounds the way a
consumer's flushes do it, so the active set stays small as in a real drain: each round
leases up to 512 jobs with the calls a drain sends (``settle`` of ``count=b`` on the
candidates the previous flush peeked, plus the peek of the next ``2*b + 16``, the
consumer's window for ``concurrency=b``), then finishes them with ``complete_batch``
calls of b attempts. Each phase's server CPU (``INFO cpu``, less the cost of the INFO
calls themselves, calibrated first) and its ``evalsha`` time (``INFO commandstats``) are
summed over the rounds. Prints one line per batch size and the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from dataclasses import dataclass

import redis

from echomq import AsyncConnector, AsyncQueue, Lease, generate_many
from echomq.servers.server import EmbeddedValkey

ROUND = 512


def cpu(r: redis.Redis) -> float:
    i = r.info("cpu")
    return float(i["used_cpu_sys"]) + float(i["used_cpu_user"])


def evalsha_usec(r: redis.Redis) -> float:
    return float(r.info("commandstats").get("cmdstat_evalsha", {}).get("usec", 0))


@dataclass
class Meter:
    """Server CPU and evalsha µs of one phase, summed over its spans."""

    r: redis.Redis
    probe: float  # server CPU of one cpu() + evalsha_usec() pair
    cpu_s: float = 0.0
    eval_us: float = 0.0
    calls: int = 0

    def start(self) -> None:
        self._c0, self._e0 = cpu(self.r), evalsha_usec(self.r)

    def stop(self) -> None:
        self.eval_us += evalsha_usec(self.r) - self._e0
        self.cpu_s += cpu(self.r) - self._c0 - self.probe


def calibrate(r: redis.Redis) -> float:
    n = 200
    c0 = cpu(r)
    for _ in range(n):
        cpu(r)
        evalsha_usec(r)
    return (cpu(r) - c0) / n


async def one(url: str, r: redis.Redis, b: int, n: int, payload: bytes, probe: float) -> str:
    conn = AsyncConnector.from_url(url)
    q = AsyncQueue(conn, f"t{b}")
    await q.fence()
    await q.enqueue_many([(i, payload) for i in generate_many("JOB", n)])
    claim, done = Meter(r, probe), Meter(r, probe)
    window = 2 * b + 16
    cands: list[bytes] = []
    total, calls_c, calls_d = 0, 0, 0
    while total < n:
        got: list[Lease] = []
        claim.start()
        while len(got) < ROUND:
            _, leases, cands = await q.settle([], count=b if cands else 0, lease_ms=600_000,
                                              candidates=cands, window=window)
            calls_c += bool(leases)
            got += leases
            if not cands and not leases:
                break
        claim.stop()
        if not got:
            break
        done.start()
        for i in range(0, len(got), b):
            await q.complete_many(got[i : i + b])
            calls_d += 1
        done.stop()
        total += len(got)
    await conn.aclose()
    return (f"batch {b:4d}: claim {claim.cpu_s / total * 1e6:6.2f} µs/job server "
            f"(evalsha {claim.eval_us / total:6.2f}; {total / max(calls_c, 1):5.1f} jobs/call)  "
            f"complete {done.cpu_s / total * 1e6:6.2f} µs/job server "
            f"(evalsha {done.eval_us / total:6.2f}; {total / max(calls_d, 1):5.1f} jobs/call)  "
            f"n={total}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=20_000)
    ap.add_argument("--batches", default="8,32,256")
    ap.add_argument("--payload", type=int, default=64)
    a = ap.parse_args()
    os.sched_setaffinity(0, {1})
    load0 = os.getloadavg()[0]
    with EmbeddedValkey(appendonly=False) as srv:
        assert srv.pid is not None
        os.sched_setaffinity(srv.pid, {0})
        r = redis.Redis.from_url(srv.url)
        probe = calibrate(r)
        for b in (int(x) for x in a.batches.split(",")):
            print(asyncio.run(one(srv.url, r, b, a.jobs, b"x" * a.payload, probe)), flush=True)
    print(f"load average {load0:.2f} -> {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
