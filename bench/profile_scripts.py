"""Profile every transition of a job's life on the server (issue 15 item 5).

    .venv/bin/python bench/profile_scripts.py [--jobs 50000] [--payload 64]

One fresh embedded Valkey pinned to CPU 0, this client on CPU 1. Three phases, each with
INFO commandstats reset before it, so each phase's figures are its own:

1. admit: ``enqueue_many`` of N jobs (ids minted before, the server is measured);
2. claim: what a consumer's drain loop sends without the finishes: ``claim`` of 32
   peeked candidates plus the ``ZRANGE`` peek of the next window (80), until pending is empty;
3. complete: ``complete_many`` (``complete_batch`` of 256) of every lease.

For each phase: server CPU per job (INFO cpu), every command's calls and µs (INFO
commandstats: ``evalsha`` is the whole script, the commands the scripts ran appear under
their own names too), LATENCY LATEST (monitor at 1 ms) and the SLOWLOG entries over 1 ms.
Then MEMORY USAGE per structure with the N jobs queued: one row, the pending set per job,
``used_memory`` per job. Prints one JSON object (and a table to stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

import redis

from echomq import AsyncConnector, AsyncQueue, Lease, generate_many
from echomq.servers.server import EmbeddedValkey

Q = "prof"


def cpu(r: redis.Redis) -> float:
    i = r.info("cpu")
    return float(i["used_cpu_sys"]) + float(i["used_cpu_user"])


def stats(r: redis.Redis) -> dict[str, dict[str, float]]:
    return {k.removeprefix("cmdstat_"): {"calls": v["calls"], "usec": v["usec"],
                                         "usec_per_call": v["usec_per_call"]}
            for k, v in r.info("commandstats").items()}


class Phase:
    def __init__(self, r: redis.Redis, name: str, n: int) -> None:
        self.r, self.name, self.n = r, name, n

    def __enter__(self) -> Phase:
        self.r.config_resetstat()
        self.r.slowlog_reset()
        self.r.execute_command("LATENCY", "RESET")
        self.c0 = cpu(self.r)
        return self

    def __exit__(self, *exc: object) -> None:
        used = cpu(self.r) - self.c0
        cs = stats(self.r)
        self.out = {
            "server_us_per_job": used / self.n * 1e6,
            "commandstats": {k: {**v, "per_job_us": v["usec"] / self.n}
                             for k, v in sorted(cs.items(), key=lambda kv: -kv[1]["usec"])
                             if k not in ("info", "config")},
            "latency_latest": self.r.execute_command("LATENCY", "LATEST"),
            "slowlog": [{"us": e["duration"], "cmd": str(e["command"])[:80]} for e in self.r.slowlog_get(10)],
        }


async def run(url: str, n: int, payload: bytes) -> dict[str, Any]:
    r = redis.Redis.from_url(url)
    r.config_set("latency-monitor-threshold", 1)
    r.config_set("slowlog-log-slower-than", 1000)
    conn = AsyncConnector.from_url(url)
    q = AsyncQueue(conn, Q)
    await q.fence()
    out: dict[str, Any] = {"n": n, "payload": len(payload)}
    ids = generate_many("JOB", n)
    m0 = int(r.info("memory")["used_memory"])
    with Phase(r, "admit", n) as ph:
        await q.enqueue_many([(i, payload) for i in ids])
    out["admit"] = ph.out
    await asyncio.sleep(0.2)  # let the server release its client buffers
    first = f"emq:{{{Q}}}:job:{ids[0]}"
    out["memory"] = {
        "used_memory_per_job": (int(r.info("memory")["used_memory"]) - m0) / n,
        "row_bytes": r.memory_usage(first, samples=0),
        "row_encoding": r.object("encoding", first),
        "row_fields": {k.decode(): len(v) for k, v in r.hgetall(first).items()},
        "key_bytes": len(first),
        "pending_bytes_per_job": (r.memory_usage(f"emq:{{{Q}}}:pending", samples=0) or 0) / n,
        "pending_encoding": r.object("encoding", f"emq:{{{Q}}}:pending"),
    }
    leases: list[Lease] = []
    with Phase(r, "claim", n) as ph:
        cands: list[bytes] = []
        while True:
            _, got, cands = await q.settle([], count=32 if cands else 0, lease_ms=600_000,
                                           candidates=cands, window=80)
            leases += got
            if not cands and not got and len(leases) >= n:
                break
    out["claim"] = ph.out
    with Phase(r, "complete", n) as ph:
        await q.complete_many(leases)
    out["complete"] = ph.out
    out["life_us_per_job"] = sum(out[k]["server_us_per_job"] for k in ("admit", "claim", "complete"))
    await conn.aclose()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=50_000)
    ap.add_argument("--payload", type=int, default=64)
    a = ap.parse_args()
    os.sched_setaffinity(0, {1})
    with EmbeddedValkey(appendonly=False) as srv:
        assert srv.pid is not None
        os.sched_setaffinity(srv.pid, {0})
        res = asyncio.run(run(srv.url, a.jobs, b"x" * a.payload))
    res["load"] = os.getloadavg()[0]
    for phase in ("admit", "claim", "complete"):
        p = res[phase]
        top = ", ".join(f"{k} {v['per_job_us']:.2f}" for k, v in list(p["commandstats"].items())[:7])
        print(f"{phase:9s} {p['server_us_per_job']:6.2f} µs/job server CPU | commandstats µs/job: {top}",
              file=sys.stderr)
    print(f"life {res['life_us_per_job']:.2f} µs/job; memory {res['memory']}", file=sys.stderr)
    print(json.dumps(res, default=str))


if __name__ == "__main__":
    main()
