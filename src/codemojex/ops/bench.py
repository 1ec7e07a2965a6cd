"""``codemojex bench``: the game at speed, and what one guess costs the servers.

Unpaced simulated players (each submits its next guess as soon as the last one is answered,
at most ``in_flight`` submissions at once over all players) play rounds of ``round_s``
seconds through the real service and the real consumers under the game's supervision tree
(:class:`~codemojex.game.app.App`). A round counts as done when it is **settled** and
every score notification of it is **told** (delivered and stamped), so the rate is end to
end: charged, scored, told, settled. The game's own audit
(:func:`codemojex.game.report.check_run`) must be clean.

Around the run it reads the servers' own accounting:

* Valkey: ``INFO cpu`` (user + sys of the server process);
* PostgreSQL: ``pg_stat_database`` (``xact_commit + xact_rollback`` of the game's database)
  and the CPU of the postmaster and every process it started (``/proc``; only when the
  server runs on this machine, else "n/a");
* the notification jobs done on ``cm.notify`` and the messages delivered (a player's score
  note tells every score of theirs not told yet in one message: decision 0049).

First a quiet interval (the tree running, no player, no round) gives the **idle cost per
second** (consumers' beats, upkeep, the reconciler's pass); the cost of the run minus the
idle cost over the run's length, divided by the charged guesses, is the cost **per guess**.
The bench's own reads while it waits (one transaction each) are counted and taken off.
"""

from __future__ import annotations

import asyncio
import collections
import os
import random
import secrets
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from psycopg_pool import AsyncConnectionPool

from codemojex.domain.emoji import default_set
from codemojex.domain.errors import ConfigurationError, Reason
from codemojex.game.app import App
from codemojex.game.report import check_run, delivered_score_notes
from codemojex.service import Admitted, RoundPlan, Services, round_id, schedule
from codemojex.wallet import ensure_player, get_round, grant_start, reads
from codemojex.wallet.serverstats import backend_pid, transactions
from codemojex.workers.notify import LOCAL_OPTIONS, ConsoleDelivery
from echomq import AsyncClusterConnector, AsyncConnector, ids

__all__ = ["BenchOptions", "BenchReport", "Sample", "bench", "render"]

_TICK = os.sysconf("SC_CLK_TCK")
_FLUSH_S = 2.5  # a backend reports its transaction counts at most once a second, an idle one within ~2 s
_STOP = (Reason.CLOSED, Reason.EXPIRED, Reason.INSUFFICIENT, Reason.NO_ROUND)


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchOptions:
    players: int = 300
    rounds: int = 1
    round_s: float = 10.0
    in_flight: int = 256  # submissions at once over all players (one charge group's size)
    idle_s: float = 5.0
    price: int = 1
    max_guesses: int = 100_000  # per player per round: the coins each starts with

    def __post_init__(self) -> None:
        if self.players < 1 or self.rounds < 1 or self.in_flight < 1 or self.max_guesses < 1:
            raise ConfigurationError("players, rounds, in_flight and max_guesses must be >= 1")
        if not 0 < self.round_s <= 3600 or not 0 <= self.idle_s <= 600:
            raise ConfigurationError("round_s must be in (0, 3600] and idle_s in [0, 600]")


@dataclass(slots=True)
class Sample:
    """One reading of the servers' accounting (``None``: not readable from here)."""

    at: float
    valkey_cpu_s: float | None
    pg_xacts: int
    pg_cpu_s: float | None
    notes: int
    messages: int = 0  # delivered by the app's delivery (the console's count)
    client_cpu_s: float = 0.0  # this process: players, service, consumers, relay
    commands: dict[str, tuple[int, float]] = field(default_factory=dict)  # calls, µs


@dataclass(slots=True)
class BenchReport:
    players: int
    rounds: int
    charged: int = 0
    refused: dict[str, int] = field(default_factory=dict)
    submit_s: float = 0.0  # first round open to last player done
    seconds: float = 0.0  # first round open to every round settled and told
    guesses_per_s: float = 0.0
    audit_ok: bool = False
    audit_failures: list[str] = field(default_factory=list)
    idle: dict[str, float | None] = field(default_factory=dict)  # per second
    per_guess: dict[str, float | None] = field(default_factory=dict)
    commands: dict[str, tuple[float, float]] = field(default_factory=dict)  # per guess: calls, µs
    totals: dict[str, float | None] = field(default_factory=dict)
    batches: dict[str, float] = field(default_factory=dict)  # mean items per group flush
    notes: dict[str, int] = field(default_factory=dict)  # score notes: admissions, skipped, told, empty
    load: tuple[float, float, float] = (0.0, 0.0, 0.0)
    cores: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Meter:
    """Reads Valkey's and PostgreSQL's accounting; counts its own transactions."""

    def __init__(self, services: Services, postmaster: int | None, delivery: ConsoleDelivery) -> None:
        self.services = services
        self.postmaster = postmaster
        self.delivery = delivery
        self.own_xacts = 0  # transactions this bench made (its reads) since the run began

    async def sample(self) -> Sample:
        info = await self.services.connector.command("INFO", "cpu")
        cpu = None
        if isinstance(info, dict) and "used_cpu_user" in info:
            cpu = float(info["used_cpu_user"]) + float(info["used_cpu_sys"])
        xacts = await transactions(self.services.pool)
        notes = (await self.services.notifications.stats()).done
        pg_cpu = None if self.postmaster is None else _tree_cpu(self.postmaster)
        stats = await self.services.connector.command("INFO", "commandstats")
        commands = ({k.removeprefix("cmdstat_"): (int(v["calls"]), float(v["usec"]))
                     for k, v in stats.items() if isinstance(v, dict)}
                    if isinstance(stats, dict) else {})
        return Sample(time.perf_counter(), cpu, xacts, pg_cpu, notes, self.delivery.counts.total(),
                      time.process_time(), commands)


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _tree_cpu(postmaster: int) -> float | None:
    """CPU seconds (user + sys) of the postmaster and every process it started."""
    own = _stat(postmaster)
    if own is None:
        return None
    total = (int(own[11]) + int(own[12])) / _TICK
    for entry in Path("/proc").iterdir():
        fields = _stat(int(entry.name)) if entry.name.isdigit() else None
        if fields is not None and fields[1] == str(postmaster):
            total += (int(fields[11]) + int(fields[12])) / _TICK
    return total


async def _postmaster(pool: AsyncConnectionPool) -> int | None:
    """The postmaster's pid when the server runs on this machine (the parent of our backend)."""
    pid = await backend_pid(pool)
    fields = _stat(pid) if pid is not None else None
    return None if fields is None else int(fields[1])


def _delta(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else b - a


async def _make_players(pool: AsyncConnectionPool, opts: BenchOptions, tag: str) -> list[str]:
    coins = opts.price * opts.max_guesses * opts.rounds
    sem = asyncio.Semaphore(16)

    async def one(i: int) -> str:
        pid = f"bench-{tag}-{i:05d}"
        async with sem:
            await ensure_player(pool, pid, name=f"bench player {i}")
            await grant_start(pool, pid, coins)
        return pid

    return list(await asyncio.gather(*(one(i) for i in range(opts.players))))


async def _unpaced(services: Services, rid: str, players: list[str], opts: BenchOptions,
                   report: BenchReport) -> None:
    """Every player guesses as fast as it is answered until the round refuses it.

    ``in_flight`` slots serve the players in turn: a slot takes the player waiting longest,
    submits its next guess, waits for the answer and puts it back at the end of the line
    (or drops it on a refusal that ends its round). A player has at most one guess in
    flight, every guess is its own ``submit``; the line is what a semaphore over
    one task per player did, without a future and a wake-up per guess."""
    from codemojex.service import submit  # the door every guess goes through

    rnd = await get_round(services.pool, rid)  # read once, as the bot reads it from its cache
    assert rnd is not None
    emoji_set = default_set(rnd.emoji_set)
    assert emoji_set is not None
    emojis = emoji_set.emojis
    refused: dict[str, int] = {}
    line = collections.deque((pid, random.Random(f"{pid}:{rid}"), [opts.max_guesses]) for pid in players)

    async def slot() -> None:
        while line:
            pid, rng, left = turn = line.popleft()
            out = await submit(services, rid, pid, rng.choices(emojis, k=6), rnd=rnd)
            left[0] -= 1
            if not isinstance(out, Admitted):
                refused[out.value] = refused.get(out.value, 0) + 1
                if out in _STOP:
                    continue
            if left[0] > 0:
                line.append(turn)

    await asyncio.gather(*(slot() for _ in range(min(opts.in_flight, len(players)))))
    for k, v in refused.items():
        report.refused[k] = report.refused.get(k, 0) + v


async def _wait(what: str, check: Any, timeout_s: float, every_s: float = 0.1) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"bench: gave up waiting for {what} after {timeout_s:.0f} s")
        await asyncio.sleep(every_s)


async def bench(pool: AsyncConnectionPool, connector: AsyncConnector | AsyncClusterConnector,
                opts: BenchOptions, *, score_shards: int = 0) -> BenchReport:
    """Run the bench (module docstring) on ``pool`` (the game's role) and ``connector``."""
    services = Services(pool, connector, score_shards=score_shards)
    await connector.command("PING")  # an unreachable Valkey fails here, before anything starts
    report = BenchReport(players=opts.players, rounds=opts.rounds, cores=os.cpu_count() or 0)
    delivery = ConsoleDelivery(write=None)
    meter = _Meter(services, await _postmaster(pool), delivery)
    tag = secrets.token_hex(3)
    players = await _make_players(pool, opts, tag)
    app = App(services, delivery=delivery, options={"notify": LOCAL_OPTIONS})
    tree = asyncio.create_task(app.run())
    try:
        await asyncio.sleep(0.5)  # the tree's children start (not measured)
        await asyncio.sleep(_FLUSH_S)
        quiet0 = await meter.sample()
        await asyncio.sleep(opts.idle_s)
        quiet1 = await meter.sample()
        run0 = quiet1
        series = ids.generate("SER")
        rids = [round_id(series, i) for i in range(opts.rounds)]
        plan = RoundPlan(count=opts.rounds, duration_ms=int(opts.round_s * 1000), price=opts.price)
        await schedule(services, plan, series=series)
        started = None
        for rid in rids:
            async def is_open(rid: str = rid) -> bool:
                meter.own_xacts += 1
                rnd = await get_round(pool, rid)
                return rnd is not None and rnd.state == "open"

            await _wait(f"round {rid} to open", is_open, opts.round_s + 30, every_s=0.02)
            started = started or time.perf_counter()
            await _unpaced(services, rid, players, opts, report)
        assert started is not None
        report.submit_s = time.perf_counter() - started

        async def done() -> bool:
            meter.own_xacts += 1
            if await reads.count_settled(pool, rids) != len(rids):
                return False
            s = await services.notifications.stats()
            if s.pending + s.active + s.delayed:
                return False
            meter.own_xacts += 2
            return await delivered_score_notes(services, rids) == \
                (await reads.run_counts(pool, rids))[1]

        await _wait("every round settled and told", done, opts.round_s + 120)
        report.seconds = time.perf_counter() - started
        await asyncio.sleep(_FLUSH_S)  # backends report their counts at most once a second
        run1 = await meter.sample()
    finally:
        app.stop()
        await tree
    for name, group in (("charges", services.charges.group), ("scores", app.scorer.stores),
                        ("score notes", app.scorer.notes.group), ("untold reads", app.notifier.untold),
                        ("stamps", app.notifier.stamps)):
        report.batches[name] = group.items / group.batches if group.batches else 0.0
    report.notes = {"admissions": app.scorer.notes.admissions, "skipped": app.scorer.notes.skipped,
                    "told": app.notifier.told, "empty": app.notifier.empty}
    notes = await delivered_score_notes(services, rids)
    checks = await check_run(pool, rids, score_notes=notes)
    report.charged = checks.charged
    report.audit_ok = checks.ok
    report.audit_failures = checks.failures
    report.guesses_per_s = checks.charged / report.seconds if report.seconds else 0.0
    # the bench's own transactions since run0: its reads, run0's own, each round's one read
    _account(report, quiet0, quiet1, run0, run1, own_xacts=meter.own_xacts + 1 + opts.rounds)
    report.load = os.getloadavg()
    return report


def _account(report: BenchReport, q0: Sample, q1: Sample, r0: Sample, r1: Sample,
             *, own_xacts: int) -> None:
    quiet_s = q1.at - q0.at
    run_s = r1.at - r0.at
    idle = {"valkey_cpu_ms": _delta(q0.valkey_cpu_s, q1.valkey_cpu_s),
            "pg_xacts": float(q1.pg_xacts - q0.pg_xacts - 1),  # less the meter's own read
            "pg_cpu_ms": _delta(q0.pg_cpu_s, q1.pg_cpu_s),
            "notes": float(q1.notes - q0.notes),
            "messages": float(q1.messages - q0.messages),
            "client_cpu_ms": 1000 * (q1.client_cpu_s - q0.client_cpu_s)}
    totals = {"valkey_cpu_ms": _delta(r0.valkey_cpu_s, r1.valkey_cpu_s),
              "pg_xacts": float(r1.pg_xacts - r0.pg_xacts - own_xacts),
              "pg_cpu_ms": _delta(r0.pg_cpu_s, r1.pg_cpu_s),
              "notes": float(r1.notes - r0.notes),
              "messages": float(r1.messages - r0.messages),
              "client_cpu_ms": 1000 * (r1.client_cpu_s - r0.client_cpu_s)}
    for d in (idle, totals):
        for k in ("valkey_cpu_ms", "pg_cpu_ms"):
            d[k] = None if d[k] is None else 1000 * d[k]  # type: ignore[operator]
    report.idle = {k: None if v is None else v / quiet_s for k, v in idle.items()}
    report.totals = dict(totals) | {"run_s": run_s}
    g = max(report.charged, 1)
    for name, (calls, usec) in r1.commands.items():
        c0, u0 = r0.commands.get(name, (0, 0.0))
        if calls > c0:
            report.commands[name] = ((calls - c0) / g, (usec - u0) / g)
    per: dict[str, float | None] = {}
    for k, v in totals.items():
        rate = report.idle[k]
        per[k] = None if v is None or rate is None else max(0.0, v - rate * run_s) / g
    vk, pg = per["valkey_cpu_ms"], per["pg_cpu_ms"]
    report.per_guess = {"valkey_cpu_us": None if vk is None else 1000 * vk,
                        "pg_xacts": per["pg_xacts"],
                        "pg_xacts_gross": (totals["pg_xacts"] or 0.0) / g,  # idle share included
                        "pg_cpu_us": None if pg is None else 1000 * pg,
                        "messages": per["messages"],
                        "note_jobs": per["notes"],
                        "client_cpu_us": 1000 * (per["client_cpu_ms"] or 0.0)}


def _fmt(v: float | None, spec: str) -> str:
    return "n/a" if v is None else format(v, spec)


def render(r: BenchReport) -> list[str]:
    """The report as lines of text (the CLI prints them; ``--json`` prints :meth:`BenchReport.as_dict`)."""
    i, p = r.idle, r.per_guess
    refused = ", ".join(f"{k} {v}" for k, v in sorted(r.refused.items())) or "none"
    return [
        f"players {r.players}, rounds {r.rounds}: {r.charged} guesses charged, scored, told and "
        f"settled in {r.seconds:.2f} s = {r.guesses_per_s:,.0f} guesses/s end to end "
        f"(submission {r.submit_s:.2f} s; refused: {refused})",
        f"per guess: Valkey CPU {_fmt(p['valkey_cpu_us'], '.1f')} µs, PostgreSQL "
        f"{_fmt(p['pg_xacts'], '.2f')} transactions ({_fmt(p['pg_xacts_gross'], '.2f')} with the idle "
        f"share) and {_fmt(p['pg_cpu_us'], '.1f')} µs CPU, "
        f"{_fmt(p['messages'], '.2f')} messages ({_fmt(p['note_jobs'], '.2f')} notification jobs); "
        "this process (players, service, consumers) "
        f"{_fmt(p['client_cpu_us'], '.1f')} µs CPU",
        f"idle, per second (subtracted): Valkey CPU {_fmt(i['valkey_cpu_ms'], '.1f')} ms, PostgreSQL "
        f"{_fmt(i['pg_xacts'], '.1f')} transactions and {_fmt(i['pg_cpu_ms'], '.1f')} ms CPU; "
        f"this process {_fmt(i['client_cpu_ms'], '.1f')} ms CPU",
        f"load average {' '.join(f'{x:.2f}' for x in r.load)} on {r.cores} cores",
        "items per flush: " + ", ".join(f"{k} {v:.1f}" for k, v in r.batches.items()),
        "score notes: " + ", ".join(f"{k} {v}" for k, v in r.notes.items()),
        "Valkey commands per guess (calls, µs inside): " + ", ".join(
            f"{k} {c:.2f} {u:.1f}" for k, (c, u) in sorted(
                r.commands.items(), key=lambda kv: -kv[1][1])[:8]),
        "AUDIT CLEAN" if r.audit_ok else "AUDIT FAILED: " + "; ".join(r.audit_failures),
    ]
