"""Server instructions per admission with and without a dedupe window, counted by
callgrind (issue 28 item 2): what ``admit``, ``throttle`` and ``debounce`` cost.

    .venv/bin/python bench/dedupe_ir.py [--jobs 2000] [--phases admit throttle ...]

Runs the embedded wheel's ``valkey-server`` under ``valgrind --tool=callgrind`` (``--hz
1``), and for each phase zeroes the counters, sends N calls one by one (``EVALSHA``, no
pipeline: the same per call for every phase) and prints the instructions (Ir) of the
whole server per call: ``admit`` (a job on a lane, no window), ``throttle`` (a new key per
job: admitted, the key set), ``refused`` (the same keys again: refused by the window),
``debounce`` (a new key per job, delayed), ``replace`` (each of those keys again: the
waiting holder's payload replaced, its due time moved). ``PYTHONPATH`` picks the package
measured (``git archive`` of an older commit for ``admit`` alone).
"""

from __future__ import annotations

import argparse
import time

from callgrind import CallgrindValkey
from echomq import generate_many
from echomq import protocol as p
from echomq.core.model import PROTOCOL

PHASES = ("admit", "throttle", "refused", "debounce", "replace")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--phases", nargs="+", default=list(PHASES), choices=PHASES)
    a = ap.parse_args()
    n = a.jobs
    srv = CallgrindValkey("dedupe_ir")
    r, ctl, total = srv.client, srv.ctl, srv.total

    k = p.QueueKeys.of("q")
    keys = [f"key-{i}" for i in range(n)]

    def calls(phase: str) -> list[p.Call]:
        ids = generate_many("JOB", n)
        if phase == "admit":
            return [p.admit(k, i, b"x" * 64, lane="l", delay_ms=0, serial=False, max_attempts=None)
                    for i in ids]
        mode = "throttle" if phase in ("throttle", "refused") else "debounce"
        dkeys = keys if mode == "throttle" else [k2 + "-d" for k2 in keys]
        lane = "l" if mode == "throttle" else ""
        return [p.deduped(k, i, b"x" * 64, key=d, window_ms=3_600_000, mode=mode,
                          lane=lane or p.dedupe_lane(d), delay_ms=60_000 if mode == "debounce" else 0,
                          serial=mode == "debounce", max_attempts=None,
                          holder=holders.get(d, ""))
                for i, d in zip(ids, dkeys, strict=True)]

    holders: dict[str, str] = {}
    with srv:
        srv.wait_ready()
        r.eval(p.fence(k, PROTOCOL).script.source, 1, k.meta, PROTOCOL)  # record the version once
        res = {}
        for phase in a.phases:
            todo = calls(phase)
            sha = r.script_load(todo[0].script.source)
            time.sleep(0.3)
            ctl("-z")
            for c in todo:
                reply = r.evalsha(sha, len(c.keys), *c.keys, *c.args)
                if phase == "debounce":
                    holders[c.keys[6].split(":dd:", 1)[1]] = reply[1].decode()
            ctl("-d")
            time.sleep(0.5)
            res[phase] = total() / n
        print(f"jobs {n}: " + ", ".join(f"{ph} {v:,.0f} Ir/call" for ph, v in res.items()))


if __name__ == "__main__":
    main()
