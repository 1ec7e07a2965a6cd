"""The server's own limit for admission, on the scripts the package ships, pre-encoded, pipelined.

    .venv/bin/python bench/limit.py --jobs 200000 [--order time|random] [--script batch|enqueue|drain]
        [--calls-of 1000] [--batch 32] [--url redis://...]

``--script batch`` (the default): exactly the calls ``AsyncQueue.enqueue_many`` sends for N
plain jobs: ``enqueue_batch.lua`` calls built by the same builder
(``echomq.protocol.encoded.BatchEnqueuer``: pending, wake, meta, parked, active, rate and one job key
per job, one 64-byte payload per job) with the same number of jobs per call
(``echomq.protocol.encoded.batch_size``), in the same order; ``--calls-of 1000`` splits the N jobs
into lists of 1,000 first, as sequential ``enqueue_many`` calls of 1,000 do.
``--script enqueue``: one ``enqueue.lua`` call per job (``echomq.protocol.enqueue``, seven
keys), what ``AsyncQueue.enqueue`` sends for one job: the per-job limit, still reported.
The ids are minted before the clock starts (this measures the server, not the client) in
the order asked: ``time`` as ``generate_many`` gives them, ``random`` the same ids shuffled.
The queue starts empty, so the pending set grows over the same sizes as the admission row
it is compared with. The requests are encoded once; writer threads keep the sockets full
while reader threads count the replies, so the server (pinned to its own core) is the
bottleneck: ``server_busy`` (server CPU ÷ wall time) near 1.0 shows it. Every job must be
enqueued (``:1`` per enqueue.lua call, a ``1`` per job in each batch's verdict string),
else the run fails.

``--script drain [--batch 32]``: the drain's limit, measured the same way (issue 30 item
2): N plain jobs admitted first (not timed), then the flushes a default ``Consumer`` sends
to drain them at ``--batch`` jobs a flush (``complete_batch`` of the last flush's leases,
``claim`` of the next with its spare candidates, the ``peek`` of the next window),
pre-encoded and written from one thread while another reads to a final ``PING``. Every job
must end done, else the run fails. The drain row divided by it says how much of the
server's drain a worker process uses.
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import sys
import threading
import time
from typing import Any
from urllib.parse import urlparse

import hiredis
import redis

from echomq import generate_many
from echomq.protocol import BatchEnqueuer, QueueKeys, batch_size, enqueue

QUEUE = "bench"
CHUNK = 1000  # enqueue.lua calls per written buffer


def resp(parts: list[bytes]) -> bytes:
    out = [b"*%d\r\n" % len(parts)]
    for x in parts:
        out.append(b"$%d\r\n%s\r\n" % (len(x), x))
    return b"".join(out)


def encoded(ids: list[str], payload: bytes) -> tuple[str, str, list[tuple[bytes, int]]]:
    """enqueue.lua calls in chunks of CHUNK: (RESP bytes, number of calls: one reply line each)."""
    k = QueueKeys.of(QUEUE)
    chunks: list[tuple[bytes, int]] = []
    buf: list[bytes] = []
    sha, source = "", ""
    for i in ids:
        call = enqueue(k, i, payload)
        sha, source = call.script.sha, call.script.source
        keys = [x.encode() if isinstance(x, str) else x for x in call.keys]
        args = [x.encode() if isinstance(x, str) else x if isinstance(x, bytes) else str(x).encode()
                for x in call.args]
        buf.append(resp([b"EVALSHA", sha.encode(), str(len(keys)).encode(), *keys, *args]))
        if len(buf) == CHUNK:
            chunks.append((b"".join(buf), len(buf)))
            buf = []
    if buf:
        chunks.append((b"".join(buf), len(buf)))
    return sha, source, chunks


def batched(ids: list[str], payload: bytes, calls_of: int) -> tuple[str, str, list[tuple[bytes, int]]]:
    """enqueue_batch.lua calls as ``enqueue_many`` builds them for lists of ``calls_of`` jobs
    (all N in one list when 0): per call, its RESP bytes and the 2 lines of its reply (a
    bulk string: ``$<n>`` and the n verdict digits)."""
    enc = BatchEnqueuer(QueueKeys.of(QUEUE))
    chunks: list[tuple[bytes, int]] = []
    step = calls_of or len(ids)
    for a in range(0, len(ids), step):
        part = ids[a : a + step]
        size = batch_size(len(part))
        for b in range(0, len(part), size):
            wire = enc.build(part[b : b + size], [payload] * len(part[b : b + size])).request()
            assert wire is not None
            chunks.append((wire, 2))
    return enc.script.sha, enc.script.source, chunks


def call_wire(call: Any) -> bytes:
    """One protocol Call as the RESP of its EVALSHA."""
    keys = [x.encode() if isinstance(x, str) else x for x in call.keys]
    args = [x.encode() if isinstance(x, str) else x if isinstance(x, bytes) else str(x).encode()
            for x in call.args]
    return resp([b"EVALSHA", call.script.sha.encode(), str(len(keys)).encode(), *keys, *args])


def drained(ids: list[str], payload: bytes, batch: int) -> tuple[list[str], list[tuple[bytes, int]]]:
    """The drain's limit (issue 30 item 2): the flushes a default Consumer sends to drain
    ``ids`` (already pending, FIFO) at ``batch`` jobs a flush, pre-encoded: each flush is
    ``complete_batch`` of the last flush's leases (attempt 1, no result), ``claim`` of the
    next ``batch`` with ``batch + max(batch, 32)`` candidates (``AsyncQueue._settle_parking``)
    and the ``peek`` of the next window (``2 * batch + 16``, the Consumer's). Returns the
    scripts' sources and the chunks (one per flush; a reply-line count of 0: the caller
    reads until the final PING's reply)."""
    from echomq import Lease
    from echomq.core.model import QueueOptions
    from echomq.protocol import calls as p

    k, keep = QueueKeys.of(QUEUE), QueueOptions().keep_done_ms
    chunks: list[tuple[bytes, int]] = []
    last: list[Lease] = []
    sources: dict[str, str] = {}
    for a in range(0, len(ids) + batch, batch):
        calls = []
        if last:
            calls.append(p.complete_batch(k, [(x, b"") for x in last], keep_ms=keep))
        part = ids[a : a + batch]
        if part:
            cands = ids[a : a + batch + max(batch, 32)]
            calls.append(p.claim(k, cands, count=len(part), lease_ms=60_000))
            calls.append(p.peek(k, "pending", start=0, count=2 * batch + 16))
        for c in calls:
            sources[c.script.name] = c.script.source
        chunks.append((b"".join(call_wire(c) for c in calls), 0))
        last = [Lease(queue=QUEUE, id=i, attempt=1, payload=payload, lane=None, deadline_ms=0) for i in part]
    return list(sources.values()), chunks


def drain_measure(url: str, n: int, batch: int = 32, payload: bytes = b"x" * 64) -> dict[str, Any]:
    """The drain's limit: N plain jobs admitted (not timed), then the flushes of
    :func:`drained` written from one thread while this one reads, to a final PING."""
    u = urlparse(url)
    host, port = u.hostname or "127.0.0.1", u.port or 6379
    r = redis.Redis(host=host, port=port)
    r.flushall()
    ids = generate_many("JOB", n)
    _, source, fill = batched(ids, payload, 0)
    r.script_load(source)
    got: list[bytes] = []
    blast(host, port, fill, got)
    sources, chunks = drained(ids, payload, batch)
    for src in sources:
        r.script_load(src)
    chunks.append((resp([b"PING"]), 0))
    sock = socket.create_connection((host, port), timeout=300)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def write() -> None:
        for c, _ in chunks:
            sock.sendall(c)

    t = threading.Thread(target=write)
    s0 = server_cpu(r)
    t0 = time.perf_counter()
    t.start()
    tail = b""
    while not tail.endswith(b"+PONG\r\n"):
        b = sock.recv(1 << 20)
        if not b:
            raise ConnectionError("server closed the connection")
        tail = (tail + b)[-64:]
    wall = time.perf_counter() - t0
    s1 = server_cpu(r)
    t.join()
    sock.close()
    done = int(r.zcard(f"emq:{{{QUEUE}}}:done"))
    if done != n or r.zcard(f"emq:{{{QUEUE}}}:active") or r.zcard(f"emq:{{{QUEUE}}}:pending"):
        raise SystemExit(f"drain limit run: {done} of {n} done")
    return {"n": n, "rate": n / wall, "seconds": wall, "server_us": (s1 - s0) / n * 1e6,
            "server_busy": (s1 - s0) / wall, "batch": batch,
            "script": f"complete_batch + claim + peek per flush of {batch} jobs (as a default Consumer "
                      f"sends them), pre-encoded, one connection"}


def blast(host: str, port: int, chunks: list[tuple[bytes, int]], got: list[bytes]) -> None:
    """Write the chunks from a thread while this one reads until every reply line came."""
    lines = sum(c for _, c in chunks)
    sock = socket.create_connection((host, port), timeout=300)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def write() -> None:
        for c, _ in chunks:
            sock.sendall(c)

    t = threading.Thread(target=write)
    t.start()
    data = bytearray()
    seen = 0
    while seen < lines:
        b = sock.recv(1 << 20)
        if not b:
            raise ConnectionError("server closed the connection")
        seen += b.count(b"\n")
        data += b
    t.join()
    sock.close()
    got.append(bytes(data))


def verdict_ones(got: list[bytes]) -> int:
    """The enqueued jobs in enqueue_batch replies: the 1s of each verdict string."""
    reader = hiredis.Reader()
    ones = 0
    for data in got:
        reader.feed(data)
        while (reply := reader.gets()) is not False:
            ones += reply.count(b"1") if isinstance(reply, bytes) else 0
    return ones


def server_cpu(r: redis.Redis) -> float:
    info = r.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def measure(url: str, n: int, order: str, payload: bytes = b"x" * 64, conns: int = 2,
            script: str = "batch", calls_of: int = 0) -> dict[str, Any]:
    """One run on a server emptied first (FLUSHALL): the rate, server µs per job, busy share."""
    u = urlparse(url)
    host, port = u.hostname or "127.0.0.1", u.port or 6379
    r = redis.Redis(host=host, port=port)
    ids = generate_many("JOB", n)
    if order == "random":
        random.Random(15).shuffle(ids)
    if script == "batch":
        # One connection: the calls reach the server in enqueue_many's order, and each is
        # large enough that one socket keeps the server busy.
        conns = 1
        sha, source, chunks = batched(ids, payload, calls_of)
    else:
        sha, source, chunks = encoded(ids, payload)
    r.flushall()
    r.script_load(source)
    # The first admission records the protocol version in meta; every run starts there.
    per = [chunks[i::conns] for i in range(conns)]
    got: list[bytes] = []
    threads = [threading.Thread(target=blast, args=(host, port, part, got)) for part in per]
    s0 = server_cpu(r)
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    s1 = server_cpu(r)
    ok = sum(g.count(b":1\r\n") for g in got) if script != "batch" else verdict_ones(got)
    if ok != n or r.zcard(f"emq:{{{QUEUE}}}:pending") != n:
        raise SystemExit(f"limit run: {ok} of {n} enqueued; replies {got[0][:200]!r}")
    what = (f"enqueue_batch.lua EVALSHA {sha[:12]}, {batch_size(calls_of or n)} jobs a call"
            + (f" in lists of {calls_of:,}" if calls_of else "") + " (as enqueue_many sends them), "
            "6 keys + one job key and one 64-byte payload per job" if script == "batch" else
            f"enqueue.lua EVALSHA {sha[:12]}, one call per job, 7 keys (job, pending, wake, meta, "
            "parked, active, rate), 64-byte payload")
    return {"n": n, "order": order, "rate": n / wall, "seconds": wall, "server_us": (s1 - s0) / n * 1e6,
            "server_busy": (s1 - s0) / wall, "connections": conns, "chunk": CHUNK, "script": what,
            "calls_of": calls_of, "batch": batch_size(calls_of or n) if script == "batch" else 1}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=200_000)
    ap.add_argument("--order", choices=("time", "random"), default="time")
    ap.add_argument("--script", choices=("batch", "enqueue", "drain"), default="batch")
    ap.add_argument("--batch", type=int, default=32, help="--script drain: jobs per flush")
    ap.add_argument("--calls-of", type=int, default=0, help="split the jobs into lists of this many")
    ap.add_argument("--url", default="")
    a = ap.parse_args()
    def run(url: str) -> dict[str, Any]:
        if a.script == "drain":
            return drain_measure(url, a.jobs, a.batch)
        return measure(url, a.jobs, a.order, script=a.script, calls_of=a.calls_of)

    if a.url:
        print(json.dumps(run(a.url)))
        return
    from echomq.servers.server import EmbeddedValkey

    with EmbeddedValkey(appendonly=False) as srv:
        print(json.dumps(run(srv.url)))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
