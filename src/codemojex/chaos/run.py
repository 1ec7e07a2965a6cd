"""``scripts/chaos.py``: run the queue and the game under a random mix of faults, then audit.

    python scripts/chaos.py [--duration 600] [--seed N] [--json FILE] [--no-cluster] [--no-game]
                            [--min-acked N] [--min-charged N]

It starts a single Valkey (AOF), a local 3+3 cluster and PostgreSQL, all embedded;
a producer and three consumer processes on a queue of the single server, a producer
(durable: a replica confirms every acknowledgement) and two consumer processes on a
queue of the cluster, and the game (its consumers in their own process, players
charging guesses in rounds of ``--round-seconds``), and with the cluster a second game
on it (its own database; a fault kills the primary under its scoring queue). For
``--duration`` seconds it
injects faults (:mod:`codemojex.chaos.faults`), each kind at least once per deck of
kinds, in a random order, one at a time. Then it stops the load, lets the consumers
drain, stops them, checks the invariants and prints the table. Exit status 0 only if
no acknowledged job is lost, every queue and money invariant holds, and the run did
work: each queue acknowledged at least ``--min-acked`` jobs (default: a tenth of what
its producer's rate asks for over the duration) and each game charged at least
``--min-charged`` guesses (default: one per second of faults) and settled every round.
A run that did nothing is a failure, never CHAOS CLEAN.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import random
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import redis
from rich.console import Console
from rich.table import Table

from codemojex.chaos.faults import KINDS, Injector
from codemojex.chaos.gamework import GameWorkload
from codemojex.chaos.queuework import QueueWorkload
from codemojex.game.report import Checks
from codemojex.infra.pg import PgServer, open_pool, with_dbname
from codemojex.service import Services
from codemojex.wallet import audit, migrate
from codemojex.wallet.admin import create_database
from echomq import AsyncClusterConnector, AsyncConnector, EmbeddedValkey, LocalCluster

__all__ = ["main", "minimums", "under_minimums"]

LEASE_MS = 2000


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="chaos", description=__doc__.split("\n\n")[0])
    p.add_argument("--duration", type=float, default=600.0, help="seconds of faults (default 600)")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: random, printed)")
    p.add_argument("--rate", type=float, default=200.0, help="jobs/s admitted on the single server")
    p.add_argument("--gap", type=float, nargs=2, default=(1.0, 4.0), metavar=("MIN", "MAX"),
                   help="seconds between faults")
    p.add_argument("--round-seconds", type=float, default=10.0)
    p.add_argument("--kinds", default=",".join(KINDS), help="comma-separated fault kinds")
    p.add_argument("--no-cluster", action="store_true", help="no cluster (and no cluster faults)")
    p.add_argument("--no-game", action="store_true", help="no game (and no PostgreSQL faults)")
    p.add_argument("--json", type=Path, default=None, help="write the figures to this file")
    p.add_argument("--keep", action="store_true", help="keep the work directory (logs, data)")
    p.add_argument("--min-acked", type=int, default=None,
                   help="fail unless each queue acknowledged this many jobs (default: 10%% of its rate"
                        " times the duration)")
    p.add_argument("--min-charged", type=int, default=None,
                   help="fail unless each game charged this many guesses (default: one per second)")
    a = p.parse_args(argv)
    unknown = set(a.kinds.split(",")) - set(KINDS)
    if unknown:
        p.error(f"unknown fault kinds {sorted(unknown)}; choose from {', '.join(KINDS)}")
    if a.duration <= 0 or a.rate <= 0 or not 0 <= a.gap[0] <= a.gap[1]:
        p.error("duration and rate must be > 0, 0 <= gap MIN <= MAX")
    if (a.min_acked is not None and a.min_acked < 1) or (a.min_charged is not None and a.min_charged < 1):
        p.error("--min-acked and --min-charged must be >= 1")
    return a


def minimums(a: argparse.Namespace) -> dict[str, int]:
    """The least work each part of the run must show: ``acked:<queue>`` and ``charged:<game>``."""
    def acked(rate: float) -> int:
        return a.min_acked if a.min_acked is not None else max(1, int(rate * a.duration / 10))

    charged = a.min_charged if a.min_charged is not None else max(1, int(a.duration))
    out = {"acked:single": acked(a.rate)}
    if not a.no_cluster:
        out["acked:cluster"] = acked(a.rate / 2)
    if not a.no_game:
        out["charged:game"] = charged
        if not a.no_cluster:
            out["charged:game-cluster"] = charged
    return out


def under_minimums(result: dict[str, Any], least: dict[str, int]) -> list[str]:
    """One line per part of the run that did less than its minimum (empty: enough work)."""
    out = []
    for key, need in least.items():
        kind, name = key.split(":", 1)
        if kind == "acked":
            got = int((result["queues"].get(name) or {}).get("acked", 0))
            what = f"queue {name} acknowledged {got} jobs"
        else:
            game = result.get("game" if name == "game" else "game_cluster") or {}
            got = int(game.get("charged", 0))
            what = f"{name} charged {got} guesses"
        if got < need:
            out.append(f"{what}, under the minimum {need}: the run did too little work to show anything")
    return out


def _node_client(cluster: LocalCluster, queue: str) -> redis.Redis:
    node = cluster.primary_for_key(f"emq:{{{queue}}}:pending")
    return redis.Redis(host=node.host, port=node.port)


async def _run(a: argparse.Namespace, work: Path, console: Console) -> dict[str, Any]:
    seed = a.seed if a.seed is not None else random.randrange(2**32)
    rng = random.Random(seed)
    console.print(f"[bold]chaos[/]: {a.duration:g}s of faults, seed {seed}, work dir {work}")
    single = EmbeddedValkey(data_dir=work / "valkey").start()
    cluster = pg = None
    pool = None
    conns: list[Any] = []
    queues: list[QueueWorkload] = []
    game: GameWorkload | None = None
    cluster_game: GameWorkload | None = None
    cpool = None
    injector: Injector | None = None
    try:
        if not a.no_cluster:
            with console.status("starting a 3+3 cluster"):
                cluster = await asyncio.to_thread(LocalCluster(base_dir=work / "cluster").start)
        pg_url = None
        if not a.no_game:
            with console.status("starting PostgreSQL"):
                pg = PgServer(data_dir=work / "pg" / "pgdata")
                pg_url = await asyncio.to_thread(pg.start)
        conn = AsyncConnector.from_url(single.url, retry_budget_s=30)
        conns.append(conn)
        queues.append(QueueWorkload(
            "single", single.url, "chaos", work, conn=conn,
            scan=lambda: redis.Redis.from_url(single.url), cluster=False, workers=3, rate=a.rate,
            lease_ms=LEASE_MS))
        cluster_queue = None
        if cluster is not None:
            curl = "redis+cluster://" + ",".join(f"{h}:{p}" for h, p in cluster.startup_nodes)
            cconn = AsyncClusterConnector.from_url(curl, retry_budget_s=30)
            conns.append(cconn)
            cl = cluster
            cluster_queue = QueueWorkload(
                "cluster", curl, "chaosc", work, conn=cconn, scan=lambda: _node_client(cl, "chaosc"),
                cluster=True, workers=2, rate=a.rate / 2, lease_ms=LEASE_MS)
            queues.append(cluster_queue)
        if pg_url is not None:
            pool = await open_pool(pg_url, min_size=2, max_size=8)
            await migrate(pool)
            rounds = max(1, round(a.duration / a.round_seconds))
            game = GameWorkload(Services(pool, conn), single.url, pg_url, work, players=40,
                                rounds=rounds, round_s=a.round_seconds)
            await game.setup(rng)
            await asyncio.to_thread(game.start_consumers)
            if cluster_queue is not None:  # the same game on the cluster, in a database of its own
                await create_database(pg_url, "chaos_cluster")
                cpg_url = with_dbname(pg_url, "chaos_cluster")
                cpool = await open_pool(cpg_url, min_size=2, max_size=8)
                await migrate(cpool)
                cluster_game = GameWorkload(Services(cpool, conns[1]), cluster_queue.url, cpg_url, work,
                                            players=40, rounds=rounds, round_s=a.round_seconds,
                                            name="game-cluster")
                await cluster_game.setup(rng)
                await asyncio.to_thread(cluster_game.start_consumers)
        for q in queues:
            q.start()
        injector = Injector(rng, single=single, cluster=cluster, pg=pg, pg_url=pg_url, queues=queues,
                            cluster_queue=cluster_queue, game=game, cluster_game=cluster_game)
        games = [g for g in (game, cluster_game) if g is not None]
        kinds = [k for k in injector.available() if k in a.kinds.split(",")]
        load = [asyncio.create_task(q.produce(random.Random(rng.random()))) for q in queues]
        for g in games:
            load += [asyncio.create_task(g.play(random.Random(rng.random()), per_second=8.0))
                     for _ in range(4 if g is game else 2)]
        recovery: dict[str, list[float]] = defaultdict(list)
        audits: list[dict[str, Any]] = []
        fault_failures: list[str] = []
        t0 = time.monotonic()
        deck: list[str] = []
        # One full deck at least (every kind once), then until the duration is spent.
        first = len(kinds)
        while kinds and (first > 0 or time.monotonic() - t0 < a.duration):
            first -= 1
            await asyncio.sleep(rng.uniform(*a.gap))
            if not deck:
                deck = rng.sample(kinds, len(kinds))
            kind = deck.pop()
            try:
                took = await injector.inject(kind)
            except Exception as exc:  # the system did not come back: a failure, reported
                fault_failures.append(f"{kind}: {type(exc).__name__}: {exc}"[:300])
                console.print(f"  {time.monotonic() - t0:6.1f}s  {kind:<17} FAILED: {exc}")
                continue
            recovery[kind].append(took)
            note = ""
            if game is not None and kind.startswith("pg_"):
                # The books right after a PostgreSQL fault, mid-game: every money invariant.
                books = all([await _audit(g) for g in games])
                audits.append({"after": kind, "ok": books})
                note = "; books balance" if books else "; BOOKS BROKEN"
            console.print(f"  {time.monotonic() - t0:6.1f}s  {kind:<17} recovered in {took:.2f}s{note}")
        remaining = a.duration - (time.monotonic() - t0)
        if remaining > 0:
            await asyncio.sleep(remaining)
        fault_s = time.monotonic() - t0
        # Stop the load, then wait for the queues to drain and every round to settle.
        for q in queues:
            q.stop_producing()
        for g in games:
            g.stop_playing()
        await asyncio.gather(*load)
        drain_t0 = time.monotonic()
        with console.status("draining"):
            deadline = drain_t0 + 120 + (a.round_seconds * 2 if game else 0)
            while time.monotonic() < deadline:
                busy = [await q.outstanding() for q in queues]
                settled = [await g.settled() == len(g.round_ids) for g in games]
                if not any(busy) and all(settled):
                    break
                await asyncio.sleep(0.2)
        drain_s = time.monotonic() - drain_t0
        for q in queues:
            await asyncio.to_thread(q.stop_workers)
        reports = {q.name: q.check() for q in queues}
        checks = await game.check() if game is not None else None
        cluster_checks = await cluster_game.check() if cluster_game is not None else None
        for g in games:
            await asyncio.to_thread(g.stop_consumers)
        errors: Counter[str] = Counter()
        for q in queues:
            errors.update({f"{q.name}: {k}": n for k, n in q.errors.items()})
            errors[f"{q.name}: consumer transient errors"] += q.worker_errors()
        for g in games:
            errors.update({f"{g.name}: {k}": n for k, n in g.errors.items()})
        least = minimums(a)
        result: dict[str, Any] = {
            "seed": seed, "duration_s": round(fault_s, 1), "drain_s": round(drain_s, 1),
            "faults": {k: {"count": len(v), "max_recovery_s": round(max(v), 2)}
                       for k, v in sorted(recovery.items())},
            "queues": {n: {**asdict(r), "failures": r.failures,
                           "lost": len(r.lost), "two_states": len(r.two_states),
                           "completed_twice": len(r.completed_twice),
                           "stale_completions": len(r.stale_completions), "unended": len(r.unended),
                           "dead_without_error": len(r.dead_without_error),
                           "not_durable": next(q.not_durable for q in queues if q.name == n)}
                       for n, r in reports.items()},
            "game": _game_figures(game, checks),
            "game_cluster": _game_figures(cluster_game, cluster_checks),
            "audits_after_pg_faults": audits,
            "fault_failures": fault_failures,
            "errors": dict(errors),
            "minimums": least,
        }
        result["under_minimums"] = under_minimums(result, least)
        result["ok"] = (all(not r.failures for r in reports.values())
                        and all(c is None or c.ok for c in (checks, cluster_checks))
                        and all(x["ok"] for x in audits) and not fault_failures
                        and not result["under_minimums"])
        return result
    finally:
        for q in queues:
            q.kill_all()
        for maybe in (game, cluster_game):
            if maybe is not None:
                maybe.kill_consumers()
        for c in conns:
            await c.aclose()
        if pool is not None:
            await pool.close()
        if cpool is not None:
            await cpool.close()
        if injector is not None:
            await asyncio.to_thread(injector.stop_pg)
        elif pg is not None:
            pg.stop()
        if cluster is not None:
            cluster.stop()
        single.stop()


def _game_figures(game: GameWorkload | None, checks: Checks | None) -> dict[str, Any] | None:
    if game is None or checks is None:
        return None
    return {
        "rounds": len(game.round_ids), "settled": len(game.round_ids) - checks.unsettled,
        "admitted": game.admitted, "rejected": dict(game.rejected),
        "charged": checks.charged, "scored": checks.scored, "unadmitted": checks.unadmitted,
        "ledger_sum": checks.audit.ledger_sum, "negative_balances": checks.audit.negative_balances,
        "duplicate_payouts": checks.audit.duplicate_payouts, "unbalanced_refs": checks.audit.unbalanced_refs,
        "payout_mismatches": len(checks.payout_mismatches), "failures": checks.failures}


async def _audit(game: GameWorkload) -> bool:
    """The wallet's audit (ledger sums to zero, no negative balance, ...); retried while the
    database is still coming back."""
    for _ in range(50):
        try:
            return (await audit(game.pool)).ok
        except Exception:
            await asyncio.sleep(0.1)
    return False


def _table(result: dict[str, Any], console: Console) -> None:
    faults = Table(title=f"Faults injected ({result['duration_s']}s, seed {result['seed']})")
    for col in ("fault", "injected", "max recovery (s)"):
        faults.add_column(col, justify="left" if col == "fault" else "right")
    for kind, f in result["faults"].items():
        faults.add_row(kind, str(f["count"]), f"{f['max_recovery_s']:.2f}")
    faults.add_row("all", str(sum(f["count"] for f in result["faults"].values())),
                   f"{max((f['max_recovery_s'] for f in result['faults'].values()), default=0):.2f}")
    console.print(faults)
    jobs = Table(title=f"Jobs (drained in {result['drain_s']}s after the faults)")
    cols = ("queue", "acked", "done", "dead", "lost", "2 states", "done twice", "stale done",
            "stale refused", "run twice", "re-run", "queued")
    for col in cols:
        jobs.add_column(col, justify="left" if col == "queue" else "right")
    for name, r in result["queues"].items():
        jobs.add_row(name, str(r["acked"]), str(r["done"]), f"{r['dead']} ({r['poison_dead']} poison)",
                     str(r["lost"]), str(r["two_states"]), str(r["completed_twice"]),
                     str(r["stale_completions"]), str(r["stale_refused"]), str(r["ended_twice"]),
                     str(r["rerun"]), str(r["queued"]))
    console.print(jobs)
    played = [(name, result[key]) for name, key in (("single", "game"), ("cluster", "game_cluster"))
              if result.get(key) is not None]
    if played:
        money = Table(title="Game and wallet")
        for col in ("game", "rounds settled", "guesses charged", "scored", "ledger sum", "negative balances",
                    "duplicate payouts", "payout mismatches"):
            money.add_column(col, justify="left" if col == "game" else "right")
        for name, g in played:
            money.add_row(name, f"{g['settled']}/{g['rounds']}", str(g["charged"]), str(g["scored"]),
                          str(g["ledger_sum"]), str(g["negative_balances"]), str(g["duplicate_payouts"]),
                          str(g["payout_mismatches"]))
        console.print(money)
    errs = ", ".join(f"{k} {n}" for k, n in sorted(result["errors"].items()) if n) or "none"
    console.print(f"[bold]errors seen[/] (ridden out): {errs}")
    failures = [f for r in result["queues"].values() for f in r["failures"]]
    failures += [f"{name} game: {f}" for name, g in played for f in g["failures"]]
    failures += result.get("under_minimums", [])
    failures += [f"wallet audit failed after {x['after']}" for x in result["audits_after_pg_faults"]
                 if not x["ok"]]
    failures += [f"no recovery from {x}" for x in result["fault_failures"]]
    for failure in failures:
        console.print(f"[bold red]FAILED[/]: {failure}")
    if result["ok"]:
        console.print("[bold green]CHAOS CLEAN[/]: no acknowledged job lost, none in two states, none "
                      "completed twice or by a stale attempt; the books balance and every round settled.")


def main(argv: Sequence[str] | None = None) -> int:
    a = _parse(argv)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # progress as it happens
    logging.basicConfig(level=logging.ERROR)
    logging.getLogger("psycopg").setLevel(logging.ERROR)  # "discarding closed connection" after a fault
    console = Console()
    if not console.is_terminal:
        console = Console(width=160)
    work = Path(tempfile.mkdtemp(prefix="echomq-chaos-"))
    try:
        result = asyncio.run(_run(a, work, console))
    except KeyboardInterrupt:
        console.print("chaos: interrupted")
        return 130
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    _table(result, console)
    if a.json is not None:
        a.json.write_text(json.dumps(result, indent=2, default=list) + "\n")
    return 0 if result["ok"] else 1
