"""Instructions per job of the claim and complete scripts, counted by callgrind (issue 15 item 5).

    .venv/bin/python bench/transition_ir.py BATCH WINDOW [--jobs 2048] [--trim N] [--interleave]

Server CPU time (``INFO cpu``) moves by ±20 % on this shared machine when the load is above
2, more than a change to a script does; an instruction count does not. This runs the
embedded wheel's ``valkey-server`` under ``valgrind --tool=callgrind`` (``--hz 1``, so the
server's cron adds little), admits N jobs, then zeroes the counters and runs N/BATCH
claims (``ZRANGE`` of WINDOW ids, then ``claim`` of BATCH on the first ``--trim`` of them),
dumps, then the same for ``complete_batch`` of BATCH leases. Prints the instructions (Ir)
of the whole server per job for each phase: the scripts, the commands they run, the
protocol and the sockets' user-space side. ``PYTHONPATH`` picks the package measured (e.g.
a ``git archive`` of main against a branch). Environment ``SUBS_CLAIM`` /
``SUBS_COMPLETE`` (``old=>new;;old=>new``) edit the script sources before loading them, to
price one line (replace a ``redis.call`` by nothing and compare).

``--interleave`` runs the calls as a consumer's flushes do (issue 30): complete the last
batch, then claim the next, so the active set stays as small as a consumer keeps it (a
listpack below 128 leases, not the skiplist of 2,048 the two phases build); it prints one
figure, claim + complete per job, with the counters zeroed once around all of it.

``--overlap`` runs the flushes as a consumer with two in flight sends them (decision 0052):
flush k completes the leases of flush k-2, claims BATCH of the first ``--trim`` ids of the
peek flush k-2 took (so the first BATCH of them were leased by flush k-1: the claim
re-checks and skips them), then peeks WINDOW ids with the ``peek`` script; one figure,
complete + claim + peek per job. ``--annotate N`` prints the N functions with the most
inclusive instructions per job of the interleaved or overlapped run (``callgrind_annotate``).
An older package (``PYTHONPATH`` at a ``git archive`` of e.g. 4972e94, before the
protocol/ layout) is driven through its own call builders (``builders``).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import time
from typing import Any

from callgrind import CallgrindValkey
from echomq import AsyncConnector, AsyncQueue, Lease

try:
    from echomq import generate_many
    from echomq.protocol import calls as p
    from echomq.protocol import decode_leases
except ImportError:  # an older package measured (PYTHONPATH), e.g. 4972e94: its own builders
    from echomq import generate
    p = None  # type: ignore[assignment]

    def generate_many(kind: str, n: int) -> list[str]:  # type: ignore[misc]
        return [generate(kind) for _ in range(n)]


def builders(q: AsyncQueue) -> tuple[Any, Any, int]:
    """(claim(ids, count, lease_ms), complete(leases, keep_ms)) -> (source, keys, args), and
    the fields per lease in the claim's reply: this package's, or an older one's."""
    if p is not None:
        def claim(ids: list[bytes], count: int, lease_ms: int) -> tuple[str, list[Any], list[Any]]:
            c = p.claim(q.k, ids, count=count, lease_ms=lease_ms)
            return c.script.source, list(c.keys), list(c.args)

        def finish(leases: list[Lease], keep_ms: int) -> tuple[str, list[Any], list[Any]]:
            c = p.complete_batch(q.k, [(x, b"") for x in leases], keep_ms=keep_ms)
            return c.script.source, list(c.keys), list(c.args)
        return claim, finish, 6
    q.options = dataclasses.replace(q.options, keep_done_ms=3_600_000)

    def old_claim(ids: list[bytes], count: int, lease_ms: int) -> tuple[str, list[Any], list[Any]]:
        script, keys, args = q._claim_call(ids, count, lease_ms)  # type: ignore[attr-defined]
        return script.source, keys, args

    def old_finish(leases: list[Lease], keep_ms: int) -> tuple[str, list[Any], list[Any]]:
        script, keys, args = q._complete_batch_call([(x, b"") for x in leases])  # type: ignore[attr-defined]
        return script.source, keys, args
    return old_claim, old_finish, 5


def edited(src: str, env: str) -> str:
    for pair in filter(None, os.environ.get(env, "").split(";;")):
        old, new = pair.split("=>")
        if old not in src:
            raise SystemExit(f"{env}: {old!r} is not in the script")
        src = src.replace(old, new)
    return src


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("batch", type=int)
    ap.add_argument("window", type=int)
    ap.add_argument("--jobs", type=int, default=2048)
    ap.add_argument("--trim", type=int, default=None, help="candidates the claim carries")
    ap.add_argument("--feature", default="plain",
                    choices=("plain", "lane", "serial", "priority", "timeout", "rate"),
                    help="what the jobs use (admitted with admit_many's options; rate: a queue rate limit)")
    ap.add_argument("--interleave", action="store_true",
                    help="complete each batch before the next claim (the active set stays small)")
    ap.add_argument("--overlap", action="store_true",
                    help="two flushes in flight: complete, claim from the peek of two flushes back, peek")
    ap.add_argument("--annotate", type=int, default=0, help="print the top N functions (inclusive Ir/job)")
    a = ap.parse_args()
    b, n = a.batch, a.jobs
    srv = CallgrindValkey("transition_ir")
    url, r, ctl, total = srv.url, srv.client, srv.ctl, srv.total

    with srv:
        srv.wait_ready()

        async def admit() -> AsyncQueue:
            conn = AsyncConnector.from_url(url)
            q = AsyncQueue(conn, "q")
            if p is not None:
                await q.fence()
            ids = generate_many("JOB", n)
            f = a.feature
            if f == "plain":
                await q.enqueue_many([(i, b"x" * 64) for i in ids])
            else:  # 256 lanes, so a serial lane never holds a claim back here
                lanes = f in ("lane", "serial")
                items = [(i, b"x" * 64, f"L{j % 256}" if lanes else None) for j, i in enumerate(ids)]
                await q.admit_many(items,  # type: ignore[arg-type]
                                   serial=f == "serial", priority=1 if f == "priority" else 0,
                                   timeout_ms=60_000 if f == "timeout" else None)
            if f == "rate":  # a queue rate limit that never holds a claim back here
                from echomq import RateLimit
                await q.set_limits(rate=RateLimit(max=100_000, per_ms=1000))
            await conn.aclose()
            return q

        q = asyncio.run(admit())
        build_claim, build_finish, stride = builders(q)
        pending = f"emq:{{{q.name}}}:pending"
        claim = r.script_load(edited(build_claim([b"x"], 1, 1)[0], "SUBS_CLAIM"))
        finish = r.script_load(edited(build_finish([], 1)[0], "SUBS_COMPLETE"))

        def claim_batch(size: int) -> list[Lease]:
            ids = r.zrange(pending, 0, a.window - 1)
            _, keys, args = build_claim(ids[: a.trim], size, 600_000)
            o = r.evalsha(claim, len(keys), *keys, *args)
            if p is not None:  # this package's reply (its deadline and stride first)
                return list(decode_leases("q", o))
            return [Lease(queue="q", id=o[j].decode(), attempt=int(o[j + 1]), payload=o[j + 2],
                          lane=None, deadline_ms=0) for j in range(0, len(o) - len(o) % stride, stride)]

        def complete(batch: list[Lease]) -> int:
            _, keys, args = build_finish(batch, 3_600_000)
            return len(r.evalsha(finish, len(keys), *keys, *args))

        def peek_call() -> tuple[str, list[Any], list[Any]]:
            c = p.peek(q.k, "pending", start=0, count=a.window)
            return c.script.source, list(c.keys), list(c.args)

        leases: list[Lease] = []
        res = {}
        if a.overlap:  # two flushes in flight (decision 0052): flush k claims from flush k-2's peek
            peek_src, peek_keys, peek_args = peek_call()
            peek = r.script_load(peek_src)

            def flush(done: list[Lease], cands: list[bytes]) -> tuple[list[Lease], list[bytes], int]:
                got = complete(done) if done else 0
                _, keys, args = build_claim(cands[: a.trim], b, 600_000)
                leased = list(decode_leases("q", r.evalsha(claim, len(keys), *keys, *args)))
                return leased, r.evalsha(peek, len(peek_keys), *peek_keys, *peek_args), got
            time.sleep(0.3)
            first = r.zrange(pending, 0, a.window - 1)
            l0, p0, _ = flush([], first)  # the two flushes before the steady state, not counted
            l1, p1, _ = flush([], first)
            ctl("-z")
            jobs = 0
            for _ in range(n // b - 4):
                got, nxt, done = flush(l0, p0)
                jobs += done
                l0, p0, l1, p1 = l1, p1, got, nxt
            ctl("-d")
            time.sleep(0.5)
            res["claim"], res["complete"] = total() / jobs, 0.0
        elif a.interleave:  # as a consumer's flushes: complete the last batch, then claim the next
            time.sleep(0.3)
            ctl("-z")
            jobs, last = 0, []
            for _ in range(n // b - 2):
                jobs += complete(last) if last else 0
                last = claim_batch(b)
            jobs += complete(last)
            ctl("-d")
            time.sleep(0.5)
            res["claim"], res["complete"] = total() / jobs, 0.0
        if a.annotate and (a.interleave or a.overlap):
            print(srv.annotate(a.annotate, jobs))
        for phase in () if a.interleave or a.overlap else ("claim", "complete"):
            time.sleep(0.3)
            ctl("-z")
            jobs = 0
            if phase == "claim":
                for _ in range(n // b - 2):
                    got = claim_batch(b)
                    leases += got
                    jobs += b
            else:
                for i in range(0, len(leases), b):
                    jobs += complete(leases[i : i + b])
            ctl("-d")
            time.sleep(0.5)
            res[phase] = total() / jobs if jobs else 0.0
        if a.interleave or a.overlap:
            how = "overlapped (complete + claim + peek)" if a.overlap else "interleaved"
            print(f"batch {b} window {a.window} trim {a.trim} jobs {n} {a.feature} {how}: "
                  f"claim + complete {res['claim']:,.0f} Ir/job")
        else:
            print(f"batch {b} window {a.window} trim {a.trim} jobs {n}: claim {res['claim']:,.0f} Ir/job, "
                  f"complete {res['complete']:,.0f} Ir/job")


if __name__ == "__main__":
    main()
