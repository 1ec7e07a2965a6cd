"""Commit-to-admission latency of the outbox, and the relay's throughput.

    python bench/outbox_latency.py [--n 500] [--interval 0.005] [--rows 20000] [--relays 1]
                                   [--game-rate 0]

An embedded Valkey and an embedded PostgreSQL (the project's own, codemojex.infra.pg.PgServer);
the outbox installed; ``echomq relay`` running as processes of their own (``--relays``), as
an operator runs it. Then:

* **latency**: ``--n`` times, one transaction writes one outbox row and commits; the clock
  starts when ``commit()`` returns and stops when the queue's wake message (sent by the
  admission onto the empty pending set) reaches this process. The job is then claimed and
  completed so the next one meets an empty queue again. p50, p90, p99 and max in ms, also
  from the moment COMMIT was sent (that adds PostgreSQL's commit, an fsync).
* **throughput**: ``--rows`` rows committed in transactions of 100 as fast as one writer
  can; rows per second from the first commit until the queue holds them all.
* ``--game-rate R``: the game's load. Every measured row is shaped as a charged guess
  (a JSON guess payload, its player's serial lane, its own ``JOB`` id, as
  ``codemojex.wallet.charge_guess`` writes it into ``cm_outbox``), and a second writer
  commits guess-shaped rows of 200 players at R per second, one per transaction, through
  the same relay while the latency is measured.

Wall time on a shared machine: the load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from codemojex.infra.pg import PgServer  # noqa: E402
from echomq import AsyncConnector, AsyncQueue, QueueOptions, generate  # noqa: E402
from echomq.outbox import Outbox, OutboxJob  # noqa: E402
from echomq.servers.server import EmbeddedValkey  # noqa: E402


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _relay(db_url: str, valkey_url: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "ECHOMQ_RELAY_CRASH_AT"}
    env["PYTHONPATH"] = str(ROOT / "src")
    return subprocess.Popen([sys.executable, "-c", "from echomq._entry import main; main()", "relay",
                             "--database-url", db_url, "--url", valkey_url, "--poll", "1"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def _admitted(sub: Any, db: Any, queue: AsyncQueue) -> None:
    """Until the wake message of the admission arrives (a subscription's confirmation, or
    an idle wait, returns None: go on waiting, 10 s at most)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        message = await sub.get_message(timeout=1.0)
        if message is not None and message.get("type") in ("message", "smessage"):
            return
    rows = await (await db.execute("SELECT count(*) FROM echomq_outbox")).fetchone()
    raise SystemExit(f"no admission within 10 s (outbox rows {rows}, pending {await queue.pending_size()})")


def _guess(queue: str, i: int) -> OutboxJob:
    """A row as the game's charge writes it: a guess payload, its player's serial lane, its id."""
    player = f"tg:{70_000_000 + i % 200}"
    payload = json.dumps({"round": "RND01M8YH41FMJQMGB7A68H720NYY", "player": player,
                          "emojis": ["😀", "😎", "🤖", "👻", "🐱", "🐶"]}).encode()
    return OutboxJob(queue=queue, payload=payload, lane=player, serial=True, job_id=generate("JOB"))


async def game_load(db_url: str, rate: float, stop: asyncio.Event) -> int:
    """Guess-shaped rows at ``rate`` per second, one per transaction, until ``stop``."""
    outbox, i = Outbox(), 0
    async with await psycopg.AsyncConnection.connect(db_url) as db:
        t0 = time.perf_counter()
        while not stop.is_set():
            await outbox.add_async(db, job=_guess("outbox-game", i))
            await db.commit()
            i += 1
            await asyncio.sleep(max(0.0, t0 + i / rate - time.perf_counter()))
    return i


async def latency(db_url: str, valkey_url: str, n: int, interval: float,
                  game_rate: float = 0.0) -> dict[str, float]:
    conn = AsyncConnector.from_url(valkey_url)
    queue = AsyncQueue(conn, "outbox-latency", options=QueueOptions(keep_done_ms=0))
    sub = await queue.wake_subscription()
    after: list[float] = []
    before: list[float] = []
    outbox = Outbox()
    stop = asyncio.Event()
    load = asyncio.create_task(game_load(db_url, game_rate, stop)) if game_rate > 0 else None
    try:
        async with await psycopg.AsyncConnection.connect(db_url) as db:
            for i in range(n + 20):  # the first 20: warm-up (connections, scripts), not counted
                if game_rate > 0:
                    await outbox.add_async(db, job=_guess("outbox-latency", i))
                else:
                    await outbox.add_async(db, "outbox-latency", b"%d" % i)
                t_send = time.perf_counter()
                await db.commit()
                t_commit = time.perf_counter()
                await _admitted(sub, db, queue)
                t_admit = time.perf_counter()
                if i >= 20:
                    after.append((t_admit - t_commit) * 1000)
                    before.append((t_admit - t_send) * 1000)
                claimed = await queue.claim(1, lease_ms=10_000)
                await queue.complete_many(list(claimed))
                await asyncio.sleep(interval)
    finally:
        stop.set()
        if load is not None:
            print(f"  game load: {await load} guess rows at {game_rate:g}/s alongside")
        await sub.aclose()
        await conn.aclose()
    return {"p50": statistics.median(after), "p90": _pct(after, 0.9), "p99": _pct(after, 0.99),
            "max": max(after), "p50_from_send": statistics.median(before),
            "p99_from_send": _pct(before, 0.99)}


async def throughput(db_url: str, valkey_url: str, rows: int) -> float:
    conn = AsyncConnector.from_url(valkey_url)
    queue = AsyncQueue(conn, "outbox-throughput")
    outbox = Outbox()
    try:
        t0 = time.perf_counter()
        async with await psycopg.AsyncConnection.connect(db_url) as db:
            for start in range(0, rows, 100):
                jobs = [OutboxJob(queue="outbox-throughput", payload=b"%d" % i)
                        for i in range(start, min(rows, start + 100))]
                await outbox.add_many_async(db, jobs)
                await db.commit()
        while await queue.pending_size() < rows:  # noqa: ASYNC110 (polling another process's work)
            await asyncio.sleep(0.005)
        return rows / (time.perf_counter() - t0)
    finally:
        await conn.aclose()


def _wait_listening(db_url: str, relays: int) -> None:
    """Until every relay has connected and LISTENs (on a loaded machine its imports alone can
    take seconds; a row committed before would wait for the poll, not show the path)."""
    deadline = time.monotonic() + 120
    with psycopg.connect(db_url, autocommit=True) as db:
        while time.monotonic() < deadline:
            row = db.execute("SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN%%'").fetchone()
            if row is not None and row[0] >= relays:
                time.sleep(0.2)
                return
            time.sleep(0.05)
    raise SystemExit("the relays did not start listening within 120 s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--interval", type=float, default=0.005)
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--relays", type=int, default=1)
    ap.add_argument("--game-rate", type=float, default=0.0, help="guess-shaped rows per second alongside")
    args = ap.parse_args()
    with EmbeddedValkey() as valkey, PgServer() as pg:
        db_url = pg.url
        with psycopg.connect(db_url) as db:
            Outbox().install(db)
        relays = [_relay(db_url, valkey.url) for _ in range(args.relays)]
        try:
            _wait_listening(db_url, args.relays)
            lat = asyncio.run(latency(db_url, valkey.url, args.n, args.interval, args.game_rate))
            rate = asyncio.run(throughput(db_url, valkey.url, args.rows))
        finally:
            for r in relays:
                r.terminate()
                r.wait(10)
    load = os.getloadavg()
    shape = f", guess-shaped, the game's load {args.game_rate:g}/s" if args.game_rate else ""
    print(f"outbox commit-to-admission over {args.n} jobs{shape}, {args.relays} relay(s), "
          f"load {load[0]:.2f} {load[1]:.2f}:")
    print(f"  from commit() returned: p50 {lat['p50']:.2f} ms  p90 {lat['p90']:.2f} ms  "
          f"p99 {lat['p99']:.2f} ms  max {lat['max']:.2f} ms")
    print(f"  from COMMIT sent:       p50 {lat['p50_from_send']:.2f} ms  p99 {lat['p99_from_send']:.2f} ms")
    print(f"  relay throughput: {rate:,.0f} rows/s ({args.rows} rows, transactions of 100)")


if __name__ == "__main__":
    main()
