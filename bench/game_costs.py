"""What one Codemojex guess costs the servers over its life (the inputs of docs/capacity.md).

    .venv/bin/python bench/game_costs.py [--players 300] [--guesses 5] [--rounds 2] [--round-s 10]

Plays a game (``codemojex.play``, the same code as ``codemojex play``: submit, charge,
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

from codemojex.datadir import DataDir
from codemojex.pg import open_pool
from codemojex.play import PlayOptions, play
from codemojex.report import check_run
from codemojex.servers import started_servers
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


async def run(url: str, pg_url: str, data: DataDir, opts: PlayOptions) -> None:
    pool = await open_pool(pg_url, min_size=4, max_size=24)
    conn = connect_async(url)
    try:
        await migrate(pool)
        services = Services(pool, conn)
        v0, cmd0 = await _valkey(conn)
        x0, p0, t0 = await _pg(pool), _pg_cpu(data), time.perf_counter()
        _, tally, _ = await play(services, opts, Console(file=io.StringIO()))
        took = time.perf_counter() - t0
        v1, cmd1 = await _valkey(conn)
        x1, p1 = await _pg(pool), _pg_cpu(data)
        checks = await check_run(pool, tally.round_ids)
        guesses = checks.charged
        notes = (await services.notifications.stats()).done
        print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())} "
              f"({os.cpu_count()} cores); audit ok: {checks.ok}")
        print(f"{guesses} charged guesses, {len(tally.round_ids)} rounds, {opts.players} players, "
              f"{took:.1f} s of play; submitted {tally.submitted}, refused "
              f"{dict(tally.rejected)}")
        print(f"valkey: {1e6 * (v1 - v0) / guesses:.0f} µs CPU per guess "
              f"({v1 - v0:.2f} s CPU, {(v1 - v0) / took:.2f} of a core)")
        calls = {k: (c - cmd0.get(k, (0, 0.0))[0], u - cmd0.get(k, (0, 0.0))[1])
                 for k, (c, u) in cmd1.items()}
        for name, (n, usec) in sorted(calls.items(), key=lambda kv: -kv[1][1])[:8]:
            if n:
                print(f"  {name:<14} {n / guesses:6.2f} calls/guess  {usec / guesses:7.1f} µs/guess "
                      f"({usec / n:.1f} µs/call)")
        xacts = x1 - x0
        print(f"postgresql: {xacts / guesses:.2f} transactions per guess "
              f"({xacts} in all, {xacts / took:.0f}/s); {1e6 * (p1 - p0) / guesses:.0f} µs CPU "
              f"per guess, {1e6 * (p1 - p0) / max(xacts, 1):.0f} µs per transaction "
              f"({(p1 - p0) / took:.2f} of a core)")
        print(f"notifications: {notes} ({notes / guesses:.2f} per guess)")
    finally:
        await conn.aclose()
        await pool.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--players", type=int, default=300)
    parser.add_argument("--guesses", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--round-s", type=float, default=10.0)
    args = parser.parse_args()
    opts = PlayOptions(players=args.players, guesses=args.guesses, rounds=args.rounds,
                       round_s=args.round_s)
    with tempfile.TemporaryDirectory(prefix="game-costs-") as tmp:
        data = DataDir(Path(tmp) / "data")
        with started_servers(Console(file=io.StringIO()), data) as (url, pg_url):
            asyncio.run(run(url, pg_url, data, opts))


if __name__ == "__main__":
    main()
