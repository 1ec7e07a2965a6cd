"""What Valkey Functions would save per call: ``enqueue.lua`` as a script (``EVALSHA``, as
the library sends it) against the same Lua as a function (``FCALL``), server instructions
per admitted job counted by callgrind (issue 30 item 1's "options worth measuring";
docs/decisions/0044-features-cost-when-used.md left it unmeasured).

    .venv/bin/python bench/functions_ir.py [-n 5000]

The function is built from the script's own expanded source: the includes (``now``,
``fence``, ``shape``, ``gate``, ``handoff``: local functions and tables) are defined once,
when the library loads, instead of at every call; the body runs inside
``redis.register_function``. ``KEYS`` and ``ARGV`` are upvalues the function sets on entry,
so the includes that read them (``shape``) read the call's. Both variants admit the same
time-ordered ids, one call per job, pipelined on one connection, from an empty queue, with
the same keys and arguments (the builder's); every reply must be 1. A probe, not a change:
the library sends ``EVALSHA`` (see the decision for what moving to functions would take).
"""

from __future__ import annotations

import argparse

import limit
from admission_instructions import send
from callgrind import CallgrindValkey
from echomq import generate_many
from echomq.protocol.calls import enqueue
from echomq.protocol.keyspace import QueueKeys
from echomq.protocol.scripts import bundle

BODY_STARTS = "if string.sub(ARGV[1] or '', 1, 3) ~= 'JOB' then"  # enqueue.lua's first line


def library() -> str:
    """enqueue.lua as a function library: includes once at load, the body per call."""
    source = bundle()["enqueue"].source
    head, rest = source.split("\n", 1)
    assert head.startswith("#!lua") and BODY_STARTS in rest, "enqueue.lua's layout changed"
    includes, body = rest.split(BODY_STARTS, 1)
    return ("#!lua name=emqprobe\nlocal KEYS, ARGV\n" + includes
            + "redis.register_function('enqueue', function(keys, args)\n"
            + "KEYS, ARGV = keys, args\n" + BODY_STARTS + body + "end)\n")


def fcalls(ids: list[str], payload: bytes) -> list[tuple[bytes, int]]:
    k = QueueKeys.of(limit.QUEUE)
    out: list[tuple[bytes, int]] = []
    buf: list[bytes] = []
    for i in ids:
        call = enqueue(k, i, payload)
        keys = [x.encode() if isinstance(x, str) else x for x in call.keys]
        args = [x.encode() if isinstance(x, str) else x if isinstance(x, bytes) else str(x).encode()
                for x in call.args]
        buf.append(limit.resp([b"FCALL", b"enqueue", str(len(keys)).encode(), *keys, *args]))
        if len(buf) == limit.CHUNK:
            out.append((b"".join(buf), len(buf)))
            buf = []
    if buf:
        out.append((b"".join(buf), len(buf)))
    return out


def count(srv: CallgrindValkey, kind: str, n: int) -> float:
    r = srv.client
    r.flushall()
    ids = generate_many("JOB", n)
    if kind == "evalsha":
        _, source, chunks = limit.encoded(ids, b"x" * 64)
        r.script_load(source)
    else:
        r.function_load(library(), replace=True)
        chunks = fcalls(ids, b"x" * 64)
    srv.ctl("-z")
    got = send(srv.port, chunks, n)
    srv.ctl("-d")
    if any(g != 1 for g in got) or r.zcard(f"emq:{{{limit.QUEUE}}}:pending") != n:
        raise SystemExit(f"{kind}: not every job enqueued; first reply {got[0]!r}")
    return srv.total() / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=5_000)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    with CallgrindValkey("functions_ir") as srv:
        srv.wait_ready()
        for rnd in range(a.rounds):
            for kind in ("evalsha", "fcall"):
                per = count(srv, kind, a.n)
                print(f"round {rnd + 1}: enqueue as {kind.upper()}, N={a.n:,}, one call per job: "
                      f"{per:,.0f} instructions/job", flush=True)


if __name__ == "__main__":
    main()
