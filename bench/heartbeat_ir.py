"""Server instructions per consumer beat for k held leases (decision 0055): ``heartbeat``
pipelined, one call per lease (a consumer's beat before), against one ``heartbeat_batch``
call (after), counted by callgrind; and, with ``--cpu``, the client's CPU per beat.

    .venv/bin/python bench/heartbeat_ir.py [--leases 1 8 32] [--beats 200] [--cpu 2000]

For each k: the embedded wheel's ``valkey-server`` under ``valgrind --tool=callgrind``
(``--hz 1``; bench/callgrind.py) gets k jobs, claims them with a 10-minute lease, then
zeroes the counters, sends ``--beats`` beats of the old kind (one pipeline of k
``EVALSHA heartbeat``), dumps, and the same for the new kind (one ``EVALSHA
heartbeat_batch`` of the k leases). Prints the instructions (Ir) of the whole server per
beat: the scripts, the commands they run, the protocol and the sockets' user-space side.
Instruction counts do not move with the machine's load. Both kinds extend every lease.
(For k = 1 the batch's figure is printed, though ``heartbeat_many`` sends ``heartbeat``
for one lease: the cheaper script for one.) ``--annotate N``: the N functions with the
most inclusive instructions per beat of each run.

``--cpu N``: against a plain embedded server (no valgrind), N beats of each kind through
the asyncio API (the old kind as ``heartbeat_many`` sent it: ``connector.pipeline`` of k
``heartbeat`` calls, each reply decoded; the new: ``AsyncQueue.heartbeat_many``), in four
alternated blocks, the client process's CPU (``time.process_time``) per beat, with the
load average before and after (CPU time moves with the load on a shared machine; compare
within one run).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections.abc import Awaitable, Callable

from callgrind import CallgrindValkey
from echomq import AsyncConnector, AsyncQueue, Connector, Lease, Queue, generate_many
from echomq import protocol as p

LEASE_MS = 600_000


def _leased(url: str, name: str, k: int) -> tuple[Queue, list[Lease]]:
    conn = Connector.from_url(url)
    q = Queue(conn, name)
    q.fence()
    q.enqueue_many([(i, b"x" * 64) for i in generate_many("JOB", k)])
    leases = q.claim(k, lease_ms=LEASE_MS)
    assert len(leases) == k
    conn.close()
    return q, leases


def instructions(ks: list[int], beats: int, annotate: int = 0) -> None:
    for k in ks:
        srv = CallgrindValkey("heartbeat_ir")
        r, ctl, total = srv.client, srv.ctl, srv.total
        with srv:
            srv.wait_ready()
            q, leases = _leased(srv.url, f"q{k}", k)
            singles = [p.heartbeat(q.k, x, lease_ms=LEASE_MS) for x in leases]
            batch = p.heartbeat_batch(q.k, leases, lease_ms=LEASE_MS)
            one, many = r.script_load(singles[0].script.source), r.script_load(batch.script.source)
            res = {}
            for kind in ("before", "after"):
                time.sleep(0.3)
                ctl("-z")
                for _ in range(beats):
                    if kind == "before":
                        pipe = r.pipeline(transaction=False)
                        for c in singles:
                            pipe.evalsha(one, len(c.keys), *c.keys, *c.args)
                        got = pipe.execute()
                    else:
                        got = r.evalsha(many, len(batch.keys), *batch.keys, *batch.args)
                    assert len(got) == k and all(int(d) > 0 for d in got), got
                ctl("-d")
                time.sleep(0.5)
                res[kind] = total() / beats
                if annotate:
                    print(f"k={k} {kind}:\n{srv.annotate(annotate, beats)}")
            note = " (heartbeat_many sends heartbeat for one lease)" if k == 1 else ""
            print(f"k={k:>3} leases: before (pipelined heartbeat) {res['before']:>9,.0f} Ir/beat "
                  f"({res['before'] / k:,.0f}/lease); after (heartbeat_batch) {res['after']:>9,.0f} "
                  f"Ir/beat ({res['after'] / k:,.0f}/lease); after/before {res['after'] / res['before']:.2f}"
                  f"{note}", flush=True)


def _beats(q: AsyncQueue, leases: list[Lease]) -> tuple[Callable[[], Awaitable[None]],
                                                          Callable[[], Awaitable[None]]]:
    """A beat of ``leases`` as ``heartbeat_many`` sent it before decision 0055 (a pipeline
    of ``heartbeat`` calls, each reply decoded), and as it sends it now."""
    async def before() -> None:
        calls = [p.heartbeat(q.k, x, lease_ms=LEASE_MS) for x in leases]
        got = [p.decode_deadline(r) for r in await q.connector.pipeline(calls)]
        assert None not in got

    async def after() -> None:
        assert None not in await q.heartbeat_many(leases, lease_ms=LEASE_MS)
    return before, after


async def client_cpu(ks: list[int], beats: int) -> None:
    from echomq.servers.server import EmbeddedValkey

    with EmbeddedValkey(appendonly=False) as server:
        for k in ks:
            q0, leases = _leased(server.url, f"c{k}", k)
            conn = AsyncConnector.from_url(server.url)
            before, after = _beats(AsyncQueue(conn, q0.name), leases)
            spent = {"before": 0.0, "after": 0.0}
            load0 = os.getloadavg()[0]
            await before()
            await after()  # both scripts loaded, the connection warm
            for _ in range(2):
                for kind, beat in (("before", before), ("after", after)):
                    t0 = time.process_time()
                    for _ in range(beats // 2):
                        await beat()
                    spent[kind] += time.process_time() - t0
            await conn.aclose()
            per = {kind: spent[kind] / beats * 1e6 for kind in spent}
            print(f"k={k:>3} leases: client CPU before {per['before']:,.0f} µs/beat, after "
                  f"{per['after']:,.0f} µs/beat (load average {load0:.1f} -> {os.getloadavg()[0]:.1f})",
                  flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--leases", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--beats", type=int, default=200)
    ap.add_argument("--cpu", type=int, default=0, help="beats of each kind for the client CPU")
    ap.add_argument("--annotate", type=int, default=0, help="print the top N functions (inclusive Ir/beat)")
    a = ap.parse_args()
    instructions(a.leases, a.beats, a.annotate)
    if a.cpu:
        asyncio.run(client_cpu(a.leases, a.cpu))


if __name__ == "__main__":
    main()
