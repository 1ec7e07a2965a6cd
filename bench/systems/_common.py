"""Shared by every system driver: phases, server CPU from INFO, the JSON result line.

A driver is run as ``python <system>.py <op> <n> <url>`` in its system's own venv,
pinned to the client CPU by the orchestrator. It prints one JSON object on its last
line. Server CPU is read from the server's own accounting (INFO cpu) around each
timed phase, so server µs per job does not depend on the client.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import redis
from _noise import Window

# Workers get the URL in BENCH_URL (their argv belongs to their CLI); drivers in argv[3].
URL = os.environ.get("BENCH_URL") or (sys.argv[3] if len(sys.argv) > 3 else "redis://127.0.0.1:6379")
HERE = os.path.dirname(os.path.abspath(__file__))
# Every system's job carries the same 64-byte payload (issue 15: "64-byte payload").
PAYLOAD = "x" * 64
PAYLOAD_BYTES = PAYLOAD.encode()
raw = redis.Redis.from_url(URL)
LAT_KEY = "bench:lat"  # every system's worker pushes its samples here
# The drain's concurrency (issue 30 item 2, the sweep in bench.py): jobs in flight in the one
# worker process, through each system's own knob; 0 = the system's default.
CONC = int(os.environ.get("BENCH_CONC") or 0)
# EchoMQ's drain with N worker processes (issue 30 item 3); 1 = the one-process drain row.
PROCS = int(os.environ.get("BENCH_PROCS") or 1)


def conc(default: int) -> int:
    """The concurrency this run sweeps to, else the system's default."""
    return CONC or default


def server_cpu() -> float:
    info = raw.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class Phase:
    """Wall time, own CPU, waited children's CPU and server CPU over a block."""

    def __enter__(self) -> Phase:
        self.s0, self.c0, self.k0 = server_cpu(), time.process_time(), children_cpu()
        self.window = Window()
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.t0
        self.client_cpu = time.process_time() - self.c0 + children_cpu() - self.k0
        self.server_cpu = server_cpu() - self.s0
        self.noise = self.window.end(self.client_cpu + self.server_cpu)

    def result(self, n: int, **extra: Any) -> dict[str, Any]:
        return {"n": n, "seconds": self.seconds, "rate": n / self.seconds,
                "server_us": self.server_cpu / n * 1e6, "client_us": self.client_cpu / n * 1e6,
                "noise": self.noise, **extra}


def worker(cmd: list[str]) -> subprocess.Popen[bytes]:
    """Start a worker process in its own session (so its own children stop with it)."""
    # The caller's PYTHONPATH stays after this folder: an A/B run that points it at another
    # tree's src (git archive) drives that tree's package in the worker too.
    path = os.pathsep.join(p for p in (HERE, os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, BENCH_URL=URL, PYTHONPATH=path)
    return subprocess.Popen(cmd, cwd=HERE, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=open(os.path.join(HERE, "..", ".peers",
                            "worker.log"), "ab"))


def stop(proc: subprocess.Popen[bytes] | list[subprocess.Popen[bytes]]) -> None:
    """Stop the worker(s) this driver started (each its process group), and reap them."""
    if isinstance(proc, list):
        for p in proc:
            stop(p)
        return
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    with contextlib.suppress(ProcessLookupError):  # stop any orphans left in the group
        os.killpg(proc.pid, signal.SIGKILL)


def drain(n: int, backlog: Callable[[], int], start: Callable[[], Any],
          finish: Callable[[Any], None], timeout: float = 150) -> dict[str, Any]:
    """Time a worker from its first taken job until the backlog is empty.

    The rate counts from the first observed drop, so worker start-up time is excluded.
    CPU: the worker's (a process: its rusage once stopped) over the drain, start-up included;
    the server's from the first taken job, as the rate (``server_us_from_start``: all of it).
    """
    s0, k0, c0 = server_cpu(), children_cpu(), time.process_time()
    window = Window()
    handle = start()
    deadline = time.monotonic() + timeout
    left = backlog()
    while left >= n and time.monotonic() < deadline:
        time.sleep(0.002)
        left = backlog()
    t0, first, s_first = time.perf_counter(), left, server_cpu()
    while left > 0 and time.monotonic() < deadline:
        time.sleep(0.002)
        left = backlog()
    t1 = time.perf_counter()
    s1 = server_cpu()
    if left > 0:
        stop(handle)  # timed out: the rate counts what it drained; never wait on a burst worker
    else:
        finish(handle)
    cpu = children_cpu() - k0 + time.process_time() - c0
    done = n - left
    # The window runs from the worker's start to its reaping, so it includes its start-up;
    # the server's CPU is read to the end of the drain (it idles after).
    noise = window.end(cpu + (server_cpu() - s0))
    # The server's CPU per job over the same window as the rate (issue 30): from the first
    # job taken, so the worker's start-up and the server's idle wait for it (14 ms of server
    # CPU for an EchoMQ worker's start and 3 s idle: ~3 us a job at N = 5,000) fall on no
    # job; server_us_from_start keeps the whole window, start-up included, as before.
    return {"n": n, "seconds": t1 - t0, "rate": (first - left) / max(t1 - t0, 1e-9),
            "server_us": (s1 - s_first) / max(first - left, 1) * 1e6,
            "server_us_from_start": (s1 - s0) / max(done, 1) * 1e6, "client_us": cpu / max(done, 1) * 1e6,
            "left": left, "noise": noise}


def latency_stats(samples: list[float]) -> dict[str, Any]:
    xs = sorted(samples)
    if not xs:
        return {"n": 0}
    pick = lambda q: xs[min(len(xs) - 1, int(q * len(xs)))] * 1e3  # noqa: E731
    return {"n": len(xs), "p50_ms": pick(0.50), "p99_ms": pick(0.99), "max_ms": xs[-1] * 1e3}


class Sampling:
    """The noise over a latency run: from before the worker starts to after it is reaped."""

    def __enter__(self) -> Sampling:
        self.s0, self.k0, self.c0 = server_cpu(), children_cpu(), time.process_time()
        self.window = Window()
        return self

    def __exit__(self, *exc: object) -> None:
        ours = server_cpu() - self.s0 + children_cpu() - self.k0 + time.process_time() - self.c0
        self.noise = self.window.end(ours)


WARM_TIMEOUT_S = 60.0


def _warm_state(sent: int, started: float) -> str:
    """The warm-up's next step from the samples so far: ``send`` another, ``wait``, ``done``."""
    got = int(raw.llen(LAT_KEY))
    if time.monotonic() - started > WARM_TIMEOUT_S:
        raise RuntimeError(f"latency warm-up: {got} of {sent} warm-up jobs ran in {WARM_TIMEOUT_S:.0f} s")
    if got == 0:
        return "send"
    if got < sent:
        return "wait"
    raw.delete(LAT_KEY)
    return "done"


def warm_up(send: Callable[[], Any], sleep: Callable[[float], Any] = time.sleep) -> int:
    """Before sampling, every system the same way: one warm-up job every 50 ms until the
    worker has run one, then wait until every warm-up job has run and drop their samples.
    The worker is then started, connected and idle, so the samples time the idle path only
    (a fixed sleep counted the start-up of a slow-importing worker in the first samples).
    Returns how many warm-up jobs were sent."""
    sent, started = 0, time.monotonic()
    while (step := _warm_state(sent, started)) != "done":
        if step == "send":
            send()
            sent += 1
        sleep(0.05)
    sleep(0.2)  # idle again before the first sample
    return sent


async def awarm_up(send: Callable[[], Any]) -> int:
    """``warm_up`` for an async driver: ``send`` returns an awaitable."""
    sent, started = 0, time.monotonic()
    while (step := _warm_state(sent, started)) != "done":
        if step == "send":
            await send()
            sent += 1
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.2)
    return sent


def latency_run(n: int, send: Callable[[], Any], start: Callable[[], subprocess.Popen[bytes]],
                tail_s: float, sleep: Callable[[float], Any] = time.sleep) -> dict[str, Any]:
    """Start the worker, warm it up (``warm_up``), send ``n`` jobs 10 ms apart, wait
    ``tail_s``, stop it.

    Blocking drivers only (async drivers have their own loop, same steps)."""
    with Sampling() as s:
        w = start()
        warm_up(send, sleep)
        for _ in range(n):
            send()
            sleep(0.01)
        sleep(tail_s)
        stop(w)
    return latency_stats(collect_latency()) | {"noise": s.noise}


def collect_latency(key: str = LAT_KEY) -> list[float]:
    return [float(x) for x in raw.lrange(key, 0, -1)]


def emit(result: dict[str, Any]) -> None:
    print(json.dumps(result), flush=True)


def op_n() -> tuple[str, int]:
    return sys.argv[1], int(sys.argv[2])


def memory_result(n: int, m0: int) -> dict[str, Any]:
    """Server memory per queued job: the used_memory delta over ``n`` jobs."""
    time.sleep(0.2)  # let the server release its client buffers before reading
    return {"n": n, "bytes_per_job": (raw.info("memory")["used_memory"] - m0) / n}
