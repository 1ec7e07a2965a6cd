"""Idle admission-to-handler latency, the bench's latency op on its own, with stage stamps.

    python bench/latency_probe.py [--n 400] [--runs 3] [--pin] [--trace] [--floor] [--interval 0.01]

An embedded Valkey; a worker process like bench/systems/echomq_sys.py's ``worker-lat``
(``Consumer(AsyncQueue(AsyncConnector.from_url(url), "bench"), handler)`` with defaults
and a blocking handler that pushes ``time.time() - float(lease.payload)``); the driver
enqueues one job every ``interval`` into the idle queue with the stamp as payload.
``--pin``: the server on CPU 0, driver and worker on CPU 1 (as bench/run.sh does).
``--trace``: the worker also stamps each stage of the path (wrapped from outside, the
library is untouched) and the probe prints the time spent between stages:

* ``admit``   driver stamp -> the admission call's reply (driver side)
* ``sent``    -> the driver's socket write of the call
* ``reply``   -> the driver's loop read its reply (negative: the worker's ``ready`` came first)
* ``ready``   -> the worker's loop read the wake message (its transport's read)
* ``recv``    driver stamp -> the wake message returned by the subscription (worker)
* ``decode``  -> the hand-off decoded (Parking.message)
* ``task``    -> the job's task started (Consumer._run_one)
* ``submit``  -> handed to the handler thread (HandlerThreads.submit)
* ``handler`` -> the handler's first line
``--floor``: before each run, the same shape with raw blocking sockets (a client
SPUBLISHes a stamp, a subscriber process stamps its arrival): what this machine gives
with no library at all, at that moment. ``--script-floor``: then the same with the real
scripts: the client sends the admission's own ``EVALSHA`` of ``enqueue.lua`` (the bytes
the library's builder makes, built after the stamp) and the subscriber, parked with
``park.lua``, stamps the hand-off's arrival and parks again: the floor plus the server's
hand-off, with no library code on the path but the request's build (an admission
the subscriber was not parked for in time is no sample: see its ``n``). Wall time on a
shared machine: quote the load (printed) and the floor with every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from typing import Any

import redis

SELF = os.path.abspath(__file__)
HERE = os.path.dirname(SELF)
STAGES = ("sent", "reply", "ready", "recv", "decode", "task", "submit", "handler")
_LAST: dict[str, float] = {}


def stamp_transport(method: str, key: str) -> None:
    """Stamp the last time an asyncio socket transport ran ``method`` (write or read)."""
    from asyncio import selector_events

    cls = selector_events._SelectorSocketTransport
    orig = getattr(cls, method)

    def wrapped(self: Any, *a: Any) -> Any:
        _LAST[key] = time.time()
        return orig(self, *a)

    setattr(cls, method, wrapped)


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))] * 1e3


def line(name: str, xs: list[float]) -> str:
    if not xs:
        return f"{name:8s} (none)"
    return (f"{name:8s} n={len(xs):4d} p50 {pct(xs, .5):6.3f}  p90 {pct(xs, .9):6.3f}  "
            f"p99 {pct(xs, .99):6.3f}  max {max(xs) * 1e3:7.3f} ms")


# ------------------------------------------------------------------ the worker
def install_trace(stamps: dict[str, dict[str, float]]) -> None:
    """Stamp each stage of the hand-off path by wrapping the library's own functions."""
    from echomq.runtime import consumer as consumer_mod
    from echomq.runtime import parking as parking_mod
    from echomq.runtime._threads import HandlerThreads

    stamp_transport("_read_ready", "ready")
    orig_message = parking_mod.Parking.message

    def message(self: Any, data: bytes) -> Any:
        t = time.time()
        mine = orig_message(self, data)
        if mine:
            lease = self.handoffs[-1]
            stamps[lease.id] = {"ready": _LAST.get("ready", t), "recv": _LAST.get("recv", t),
                                "decode": time.time()}
        return mine

    parking_mod.Parking.message = message  # type: ignore[method-assign]

    # The job's task (older consumers: Consumer._run_one; then TaskRuns._run_one); a
    # blocking handler without hooks or timeout has no task (HandlerThreads.run_direct).
    try:
        from echomq.runtime.task_runs import TaskRuns
        owner: Any = TaskRuns
    except ImportError:
        owner = consumer_mod.Consumer
    orig_run_one = owner._run_one

    async def run_one(self: Any, lease: Any) -> None:
        stamps.setdefault(lease.id, {})["task"] = time.time()
        await orig_run_one(self, lease)

    owner._run_one = run_one

    for name in ("submit", "run_direct"):
        orig = getattr(HandlerThreads, name, None)
        if orig is None:
            continue

        def handed(self: Any, fn: Any, lease: Any, _orig: Any = orig) -> Any:
            stamps.setdefault(lease.id, {})["submit"] = time.time()
            return _orig(self, fn, lease)

        setattr(HandlerThreads, name, handed)

    # The receive: the wake link's data_received (echomq.runtime.wake_link), else redis-py's
    # get_message on the subscription (the code before the link).
    try:
        from echomq.runtime.wake_link import WakeLink
    except ImportError:
        WakeLink = None  # type: ignore[assignment,misc]
    if WakeLink is not None:
        orig_data = WakeLink.data_received

        def data_received(self: Any, data: bytes) -> None:
            _LAST["recv"] = time.time()
            orig_data(self, data)

        WakeLink.data_received = data_received  # type: ignore[method-assign]
        return
    from echomq.client._async.queue import AsyncQueue

    orig_sub = AsyncQueue.wake_subscription

    async def wake_subscription(self: Any) -> Any:
        sub = await orig_sub(self)
        orig_get = sub.get_message

        async def get_message(*a: Any, **k: Any) -> Any:
            msg = await orig_get(*a, **k)
            if msg is not None:
                _LAST["recv"] = time.time()
            return msg

        sub.get_message = get_message
        return sub

    AsyncQueue.wake_subscription = wake_subscription  # type: ignore[method-assign]


async def worker(url: str, trace: bool, async_handler: bool = False) -> None:
    from echomq import AsyncConnector, AsyncQueue
    from echomq.runtime.consumer import Consumer

    raw = redis.Redis.from_url(url)
    stamps: dict[str, dict[str, float]] = {}
    if trace:
        install_trace(stamps)

    def handler(lease: Any) -> None:
        t = time.time()
        raw.rpush("bench:lat", t - float(lease.payload))
        if trace:
            s = stamps.pop(lease.id, {})
            s["handler"], s["id"] = t, lease.id  # type: ignore[assignment]
            raw.rpush("bench:lat:trace", json.dumps(s))

    async def on_loop(lease: Any) -> None:  # --async-handler: no thread hop
        handler(lease)

    consumer = Consumer(AsyncQueue(AsyncConnector.from_url(url), "bench"),
                        on_loop if async_handler else handler)
    loop = asyncio.get_running_loop()
    import signal
    loop.add_signal_handler(signal.SIGTERM, consumer.stop)
    await consumer.run()


# ------------------------------------------------------------------ the driver
ASYNC_HANDLER = False  # --async-handler: the worker's handler is a coroutine function


def start_worker(url: str, trace: bool, pin: bool) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, SELF, "--worker", url] + (["--trace"] if trace else []) + (
        ["--async-handler"] if ASYNC_HANDLER else [])
    return subprocess.Popen(["taskset", "-c", "1", *cmd] if pin else cmd, cwd=HERE)


async def drive(url: str, n: int, interval: float, trace: bool, pin: bool,
                ready: bool = False) -> dict[str, Any]:
    from echomq import AsyncConnector, AsyncQueue, generate

    raw = redis.Redis.from_url(url)
    raw.delete("bench:lat", "bench:lat:trace")
    if trace and "reply" not in _LAST:  # before the first connection: its reader is bound then
        stamp_transport("_read_ready", "reply")
        _LAST["reply"] = 0.0
    c = AsyncConnector.from_url(url)
    q = AsyncQueue(c, "bench")
    await q.enqueue_many([(generate("JOB"), b"warm") for _ in range(10)])
    raw.delete(*raw.keys("emq:*"))
    w = start_worker(url, trace, pin)
    sent: dict[str, tuple[float, float]] = {}
    wrote: dict[str, float] = {}
    replied: dict[str, float] = {}
    if trace:
        stamp_transport("write", "sent")
        stamp_transport("writelines", "sent")
    load0 = os.getloadavg()[0]
    cpu0 = (time.process_time(), raw.info("cpu"))
    t_start = time.monotonic()
    try:
        await asyncio.sleep(1.5)  # as the bench does
        for _ in range(6000 if ready else 0):  # --ready: until the consumer is parked (60 s)
            if raw.exists("emq:{bench}:parked") or w.poll() is not None:
                break
            await asyncio.sleep(0.01)
        waited = time.monotonic() - t_start
        for _ in range(n):
            jid = generate("JOB")
            t0 = time.time()
            await q.enqueue(jid, repr(t0).encode())
            sent[jid] = (t0, time.time())
            wrote[jid] = _LAST.get("sent", t0)
            replied[jid] = _LAST.get("reply", t0)
            await asyncio.sleep(interval)
        for _ in range(200):
            if raw.llen("bench:lat") >= n:
                break
            await asyncio.sleep(0.05)
    finally:
        w.terminate()
        w.wait(15)
        await c.aclose()
    lat = [float(x) for x in raw.lrange("bench:lat", 0, -1)]
    out: dict[str, Any] = {"n": len(lat), "load": load0, "total": lat, "waited": waited,
                           "admit": [b - a for a, b in sent.values()],
                           "driver_cpu_ms_per_job": (time.process_time() - cpu0[0]) / max(1, n) * 1e3}
    info = raw.info("cpu")
    out["server_cpu_us_per_job"] = (
        (float(info["used_cpu_sys"]) + float(info["used_cpu_user"]))
        - (float(cpu0[1]["used_cpu_sys"]) + float(cpu0[1]["used_cpu_user"]))) / max(1, n) * 1e6
    if trace:
        gaps: dict[str, list[float]] = {s: [] for s in STAGES}
        slow: list[tuple[float, str]] = []
        order = list(sent)
        for row in raw.lrange("bench:lat:trace", 0, -1):
            s = json.loads(row)
            t0 = sent.get(s.get("id", ""), (None, None))[0]
            if t0 is None:
                continue
            prev = t0
            s["sent"] = wrote.get(s["id"], t0)
            s["reply"] = replied.get(s["id"], t0)
            parts = []
            for stage in STAGES:
                if stage in s:
                    gaps[stage].append(s[stage] - prev)
                    parts.append(f"{stage} {(s[stage] - prev) * 1e3:.2f}")
                    prev = s[stage]
            slow.append((s["handler"] - t0, f"#{order.index(s['id'])} " + ", ".join(parts)))
        out["gaps"] = gaps
        out["slowest"] = sorted(slow, reverse=True)[:5]
    return out


FLOOR_SUB = """
import socket, sys, time, redis
host, port = sys.argv[1], int(sys.argv[2])
raw = redis.Redis(host=host, port=port)
s = socket.create_connection((host, port))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
s.sendall(b"*2\\r\\n$10\\r\\nSSUBSCRIBE\\r\\n$5\\r\\nfloor\\r\\n")
s.recv(100)
while True:
    d = s.recv(1000)
    t = time.time()
    if not d or b"quit" in d:
        break
    raw.rpush("floor:lat", t - float(d.rsplit(b"\\r\\n", 2)[-2]))
"""


def floor(url: str, port: int, n: int, interval: float, pin: bool) -> list[float]:
    """The machine's own floor for the same shape: a blocking-socket client SPUBLISHes a
    stamp every ``interval``, a blocking-socket subscriber process stamps its arrival."""
    import socket

    raw = redis.Redis.from_url(url)
    raw.delete("floor:lat")
    cmd = [sys.executable, "-c", FLOOR_SUB, "127.0.0.1", str(port)]
    sub = subprocess.Popen(["taskset", "-c", "1", *cmd] if pin else cmd)
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for _ in range(100):  # until the subscriber is subscribed
        s.sendall(b"*3\r\n$6\r\nPUBSUB\r\n$11\r\nSHARDNUMSUB\r\n$5\r\nfloor\r\n")
        if s.recv(1000).endswith(b":1\r\n"):
            break
        time.sleep(0.05)
    time.sleep(0.5)
    for _ in range(n):
        p = repr(time.time()).encode()
        s.sendall(b"*3\r\n$8\r\nSPUBLISH\r\n$5\r\nfloor\r\n$%d\r\n%s\r\n" % (len(p), p))
        s.recv(100)
        time.sleep(interval)
    s.sendall(b"*3\r\n$8\r\nSPUBLISH\r\n$5\r\nfloor\r\n$4\r\nquit\r\n")
    s.recv(100)
    sub.wait(15)
    return [float(x) for x in raw.lrange("floor:lat", 0, -1)]


SCRIPT_SUB = """
import socket, sys, time, hiredis, redis
from echomq.client._wire import pack_command
from echomq.protocol import keyspace
from echomq.protocol.handoff import park
host, port = sys.argv[1], int(sys.argv[2])
raw = redis.Redis(host=host, port=port)
k = keyspace.QueueKeys.of("bench")
call = park(k, "floor", lease_ms=30000, ttl_ms=60000)
raw.script_load(call.script.source)
parking = call.request() or pack_command("EVALSHA", call.script.sha, len(call.keys), *call.keys, *call.args)
s = socket.create_connection((host, port))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
s.sendall(pack_command("SSUBSCRIBE", k.wake))
s.recv(1000)
p = socket.create_connection((host, port))
p.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
p.sendall(parking)
p.recv(100)
reader, done = hiredis.Reader(), False
while not done:
    d = s.recv(4000)
    t = time.time()
    if not d:
        break
    reader.feed(d)
    while (m := reader.gets()) is not False:
        if m[2] == b"quit":
            done = True
            break
        if m[2].startswith(b"EMQH|"):
            raw.rpush("floor:lat", t - float(m[2].rsplit(b"|", 1)[-1]))
        else:  # not parked in time (descheduled past the interval): pending, no sample
            raw.zrem(k.pending, m[2])  # so the next admission finds pending empty again
        p.sendall(parking)
        p.recv(100)
"""


def script_floor(url: str, port: int, n: int, interval: float, pin: bool) -> list[float]:
    """The floor with the server's hand-off: raw sockets, the real ``enqueue`` and ``park``
    scripts (see the module)."""
    import socket

    from echomq import AsyncConnector, AsyncQueue, generate
    from echomq.protocol import keyspace

    raw = redis.Redis.from_url(url)
    raw.delete("floor:lat")
    q = AsyncQueue(AsyncConnector.from_url(url), "bench")

    async def warm() -> None:  # the queue's meta, enqueue.lua loaded; no registration left
        await q.enqueue(generate("JOB"), b"warm")
        await q.connector.aclose()

    raw.delete("emq:x", *raw.keys("emq:*"))
    asyncio.run(warm())
    raw.delete("emq:{bench}:pending", *raw.keys("emq:{bench}:job:*"))
    cmd = [sys.executable, "-c", SCRIPT_SUB, "127.0.0.1", str(port)]
    sub = subprocess.Popen(["taskset", "-c", "1", *cmd] if pin else cmd)
    time.sleep(1.5)
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    admission = q.admission
    for _ in range(n):
        jid = generate("JOB")
        t = time.time()
        request = admission.call(jid, repr(t).encode(), None, 0, False, None).request()
        assert request is not None
        s.sendall(request)
        s.recv(100)
        time.sleep(interval)
    wake = keyspace.QueueKeys.of("bench").wake.encode()
    s.sendall(b"*3\r\n$8\r\nSPUBLISH\r\n$%d\r\n%s\r\n$4\r\nquit\r\n" % (len(wake), wake))
    s.recv(100)
    sub.wait(15)
    raw.delete("emq:x", *raw.keys("emq:*"))
    return [float(x) for x in raw.lrange("floor:lat", 0, -1)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker")
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--interval", type=float, default=0.01)
    ap.add_argument("--pin", action="store_true")
    ap.add_argument("--trace", action="store_true")
    ap.add_argument("--ready", action="store_true",
                    help="after the bench's 1.5 s, also wait until the consumer is parked")
    ap.add_argument("--floor", action="store_true",
                    help="also measure the machine's floor (raw sockets) before each run")
    ap.add_argument("--script-floor", action="store_true",
                    help="also the floor with the real enqueue and park scripts (raw sockets)")
    ap.add_argument("--async-handler", action="store_true",
                    help="the worker's handler is an async def (runs on its loop: no thread "
                         "hand-off); the default is a plain function, as the bench's")
    a = ap.parse_args()
    global ASYNC_HANDLER
    ASYNC_HANDLER = a.async_handler
    if a.worker:
        asyncio.run(worker(a.worker, a.trace, a.async_handler))
        return
    from echomq.servers.server import EmbeddedValkey

    with EmbeddedValkey(appendonly=False) as srv:
        if a.pin:
            assert srv.pid is not None
            os.sched_setaffinity(srv.pid, {0})
            os.sched_setaffinity(0, {1})
        for run in range(a.runs):
            if a.floor:
                xs = floor(srv.url, srv.port, a.n, a.interval, a.pin)
                print(f"floor {run + 1}: load {os.getloadavg()[0]:.2f}  " + line("FLOOR", xs), flush=True)
            if a.script_floor:
                xs = script_floor(srv.url, srv.port, a.n, a.interval, a.pin)
                print(f"script floor {run + 1}: load {os.getloadavg()[0]:.2f}  " + line("SCRIPT", xs),
                      flush=True)
            r = asyncio.run(drive(srv.url, a.n, a.interval, a.trace, a.pin, a.ready))
            print(f"run {run + 1}: load {r['load']:.2f}  pin={a.pin}  first job at {r['waited']:.2f} s  "
                  f"driver cpu {r['driver_cpu_ms_per_job']:.3f} ms/job  "
                  f"server cpu {r['server_cpu_us_per_job']:.1f} us/job", flush=True)
            print("  " + line("TOTAL", r["total"]))
            print("  " + line("admit", r["admit"]))
            for stage, xs in r.get("gaps", {}).items():
                print("  +" + line(stage, xs))
            for total, parts in r.get("slowest", []):
                print(f"  slow {total * 1e3:8.2f} ms: {parts}")


if __name__ == "__main__":
    main()
