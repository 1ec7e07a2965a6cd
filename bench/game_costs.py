"""What one Codemojex guess costs the servers over its life (the inputs of docs/capacity.md).

    .venv/bin/python bench/game_costs.py [--players 1,40] [--guesses 5] [--rounds 2] [--round-s 15]

Plays a game (``codemojex.game.play``, the same code as ``codemojex play``: submit, charge,
scoring, settlement, notifications, cache tier, reconciler) on an embedded Valkey and an
embedded PostgreSQL, and reads around it:

* Valkey: process CPU (``INFO cpu``, user + sys) and ``INFO commandstats`` (calls and
  µs per command), divided by the charged guesses: server µs per guess over its life,
  whatever the queue or key it touched;
* PostgreSQL: ``pg_stat_database`` (``xact_commit`` + ``xact_rollback``) and the CPU of
  the postmaster and its children (``/proc``), divided by the guesses: transactions per
  guess and CPU per transaction. Background work (the reconciler's pass every second,
  the relay) is included: it is part of what the game costs;
* the notifications sent (jobs done on ``cm.notify``) per guess.

It plays twice, with few and with many players, rounds of the same length: the
difference between the runs divided by the difference in guesses is the *marginal*
cost of a guess; the rest is the game's fixed cost per second (consumers polling each
beat, the reconciler's pass every second, upkeep).

Every figure is per charged guess of this run. A shared machine slows everything;
CPU per operation moves less than rates do.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from codemojex.game.play import PlayOptions, play
from codemojex.game.report import check_run
from codemojex.infra.datadir import DataDir
from codemojex.infra.pg import open_pool
from codemojex.infra.servers import started_servers
from codemojex.service import Services
from codemojex.wallet import migrate
from echomq import connect_async

_TICK = os.sysconf("SC_CLK_TCK")


def _proc_cpu(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime + stime


def _pg_cpu(data: DataDir) -> float:
    """CPU seconds of the PostgreSQL postmaster and every process it started."""
    postmaster = int((data.pg_dir / "postmaster.pid").read_text().split()[0])
    total = _proc_cpu(postmaster)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == postmaster:
                total += _proc_cpu(int(entry.name))
    return total


async def _valkey(conn: Any) -> tuple[float, dict[str, tuple[int, float]]]:
    cpu = await conn.command("INFO", "cpu")
    stats = await conn.command("INFO", "commandstats")
    used = float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])
    return used, {k.removeprefix("cmdstat_"): (int(v["calls"]), float(v["usec"]))
                  for k, v in stats.items()}


async def _pg(pool: Any) -> int:
    async with pool.connection() as c:
        row = await (await c.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database "
            "WHERE datname = current_database()")).fetchone()
    return int(row[0])


async def _one(services: Services, pool: Any, conn: Any, data: DataDir,
               opts: PlayOptions) -> dict[str, Any]:
    v0, cmd0 = await _valkey(conn)
    x0, p0, t0 = await _pg(pool), _pg_cpu(data), time.perf_counter()
    n0 = (await services.notifications.stats()).done
    _, tally, _ = await play(services, opts, Console(file=io.StringIO()))
    took = time.perf_counter() - t0
    v1, cmd1 = await _valkey(conn)
    x1, p1 = await _pg(pool), _pg_cpu(data)
    checks = await check_run(pool, tally.round_ids)
    calls = {k: (c - cmd0.get(k, (0, 0.0))[0], u - cmd0.get(k, (0, 0.0))[1])
             for k, (c, u) in cmd1.items()}
    out = {"players": opts.players, "guesses": checks.charged, "seconds": took, "ok": checks.ok,
           "valkey_cpu_s": v1 - v0, "pg_xacts": x1 - x0, "pg_cpu_s": p1 - p0,
           "notes": (await services.notifications.stats()).done - n0,
           "evalsha": calls.get("evalsha", (0, 0.0)), "calls": calls,
           "refused": {str(k.value): v for k, v in tally.rejected.items()}}
    g = out["guesses"]
    print(f"run: {opts.players} players, {g} charged guesses in {took:.1f} s (audit ok: "
          f"{checks.ok}; refused {out['refused']}): valkey {out['valkey_cpu_s']:.2f} s CPU, "
          f"{out['pg_xacts']} PostgreSQL transactions, {out['pg_cpu_s']:.2f} s PostgreSQL CPU, "
          f"{out['notes']} notifications")
    return out


async def run(url: str, pg_url: str, data: DataDir, players: list[int], opts: PlayOptions) -> None:
    pool = await open_pool(pg_url, min_size=4, max_size=24)
    conn = connect_async(url)
    try:
        await migrate(pool)
        services = Services(pool, conn)
        runs = [await _one(services, pool, conn, data, PlayOptions(
            players=n, guesses=opts.guesses, rounds=opts.rounds, round_s=opts.round_s))
            for n in players]
        print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())} "
              f"({os.cpu_count()} cores)")
        # Two runs of the same length with different numbers of guesses: the difference is
        # what the guesses cost (marginal), the rest is what the game costs per second idle
        # (consumers polling each beat, the reconciler's pass, upkeep).
        a, b = runs[0], runs[-1]
        dg = b["guesses"] - a["guesses"]
        for key, unit, scale in (("valkey_cpu_s", "µs Valkey CPU", 1e6),
                                 ("pg_xacts", "PostgreSQL transactions", 1.0),
                                 ("pg_cpu_s", "µs PostgreSQL CPU", 1e6),
                                 ("notes", "notifications", 1.0)):
            marginal = scale * (b[key] - a[key]) / dg
            fixed = (scale * a[key] - marginal * a["guesses"]) / a["seconds"]
            print(f"per guess: {marginal:10.2f} {unit}   (fixed: {fixed:,.1f} per second)")
        (ca, ua), (cb, ub) = a["evalsha"], b["evalsha"]
        print(f"per guess: {(cb - ca) / dg:10.2f} script calls, {(ub - ua) / dg:,.0f} µs of script "
              f"time (commandstats, wall time inside the scripts)")
        print(f"per PostgreSQL transaction: "
              f"{1e6 * (b['pg_cpu_s'] - a['pg_cpu_s']) / max(b['pg_xacts'] - a['pg_xacts'], 1):.0f}"
              " µs CPU (marginal)")
    finally:
        await conn.aclose()
        await pool.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--players", type=lambda v: [int(x) for x in v.split(",")],
                        default=[1, 40], help="players of each run (two runs: marginal cost)")
    parser.add_argument("--guesses", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--round-s", type=float, default=15.0)
    args = parser.parse_args()
    opts = PlayOptions(players=1, guesses=args.guesses, rounds=args.rounds, round_s=args.round_s)
    with tempfile.TemporaryDirectory(prefix="game-costs-") as tmp:
        data = DataDir(Path(tmp) / "data")
        with started_servers(Console(file=io.StringIO()), data) as (url, pg_url):
            asyncio.run(run(url, pg_url, data, args.players, opts))


if __name__ == "__main__":
    main()
