"""The server's own limit for admission: the real ``enqueue.lua``, pre-encoded, pipelined.

    .venv/bin/python bench/limit.py --jobs 200000 [--order time|random] [--url redis://...]

Exactly the call ``AsyncQueue.enqueue_many`` sends (``echomq.protocol.enqueue``: the job,
pending, wake, meta, parked, active and rate keys, the id and a 64-byte payload),
``EVALSHA`` of the script the package ships. The ids are minted before the clock starts
(this measures the server, not the client) in the order asked: ``time`` as ``generate_many``
gives them, ``random`` the same ids shuffled. The queue starts empty, so the pending set
grows over the same sizes as the admission row it is compared with. The commands are encoded
once; two connections each keep the socket full from a writer thread while a reader thread
counts the replies, so the server (pinned to its own core) is the bottleneck:
``server_busy`` (server CPU ÷ wall time) near 1.0 shows it. Every reply must be ``:1``
(enqueued), else the run fails.
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

import redis

from echomq import generate_many
from echomq.protocol import QueueKeys, enqueue

QUEUE = "bench"
CHUNK = 1000


def resp(parts: list[bytes]) -> bytes:
    out = [b"*%d\r\n" % len(parts)]
    for x in parts:
        out.append(b"$%d\r\n%s\r\n" % (len(x), x))
    return b"".join(out)


def encoded(ids: list[str], payload: bytes) -> tuple[str, str, list[tuple[bytes, int]]]:
    """The calls in chunks of CHUNK: (RESP bytes, number of calls)."""
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


def blast(host: str, port: int, chunks: list[tuple[bytes, int]], got: list[bytes]) -> None:
    replies = sum(c for _, c in chunks)
    sock = socket.create_connection((host, port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def write() -> None:
        for c, _ in chunks:
            sock.sendall(c)

    t = threading.Thread(target=write)
    t.start()
    data = bytearray()
    seen = 0
    while seen < replies:
        b = sock.recv(1 << 20)
        if not b:
            raise ConnectionError("server closed the connection")
        seen += b.count(b"\n")
        data += b
    t.join()
    sock.close()
    got.append(bytes(data))


def server_cpu(r: redis.Redis) -> float:
    info = r.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def measure(url: str, n: int, order: str, payload: bytes = b"x" * 64, conns: int = 2) -> dict[str, Any]:
    """One run on a server emptied first (FLUSHALL): the rate, server µs per call, busy share."""
    u = urlparse(url)
    host, port = u.hostname or "127.0.0.1", u.port or 6379
    r = redis.Redis(host=host, port=port)
    ids = generate_many("JOB", n)
    if order == "random":
        random.Random(15).shuffle(ids)
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
    ok = sum(g.count(b":1\r\n") for g in got)
    if ok != n or r.zcard(f"emq:{{{QUEUE}}}:pending") != n:
        raise SystemExit(f"limit run: {ok} of {n} enqueued; replies {got[0][:200]!r}")
    return {"n": n, "order": order, "rate": n / wall, "seconds": wall, "server_us": (s1 - s0) / n * 1e6,
            "server_busy": (s1 - s0) / wall, "connections": conns, "chunk": CHUNK,
            "script": f"enqueue.lua EVALSHA {sha[:12]}, 7 keys (job, pending, wake, meta, parked, "
                      "active, rate), 64-byte payload"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=200_000)
    ap.add_argument("--order", choices=("time", "random"), default="time")
    ap.add_argument("--url", default="")
    a = ap.parse_args()
    if a.url:
        print(json.dumps(measure(a.url, a.jobs, a.order)))
        return
    from echomq.server import EmbeddedValkey

    with EmbeddedValkey(appendonly=False) as srv:
        print(json.dumps(measure(srv.url, a.jobs, a.order)))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
