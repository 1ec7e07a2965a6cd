"""The main job's game: simulated players against the real service (``codemojex play``).

An entry point: the CLI runs it and nothing else imports it (its record of a run,
:class:`~codemojex.game.report.Tally`, lives with the report that reads it).

Everything below goes through the real paths: players call
:func:`codemojex.service.submit`; the real consumers under the app's supervision
tree score, settle and notify; rounds open and close by delayed jobs. This module
only drives players, shows progress, and reads the books afterwards
(:mod:`codemojex.game.report`).

A game survives its process: with a :class:`~codemojex.infra.datadir.DataDir` the game
in flight (series, rounds, players, options) is recorded before its first round
opens, and every guess has a deterministic id (derived from its round, player and
number), so a resumed game (:func:`play` with ``resume=``) submits each guess it
had not submitted yet and charges none twice, re-admits the open job of its next
round if the queue lost it, and waits for every round to settle (the app's
reconciler drives the rounds a crash left behind).
"""

from __future__ import annotations

import asyncio
import random
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from psycopg_pool import AsyncConnectionPool
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from codemojex.domain.emoji import default_set
from codemojex.domain.errors import ConfigurationError, DatabaseError, Reason
from codemojex.game.app import App
from codemojex.game.report import Tally
from codemojex.infra.datadir import DataDir
from codemojex.infra.waiting import repeat_until, wait_for
from codemojex.service import Admitted, RoundPlan, Services, derive_id, kick, round_id, schedule, submit
from codemojex.service.codec import OpenRound, encode
from codemojex.wallet import ensure_player, get_round, grant_start, reads
from codemojex.wallet.series import get_series
from echomq import ids

__all__ = ["PlayOptions", "guess_id", "play", "run_players"]

IN_FLIGHT = 8


@dataclass(frozen=True, slots=True, kw_only=True)
class PlayOptions:
    players: int = 300
    guesses: int = 5  # per player per round
    rounds: int = 3
    round_s: float = 15.0
    price: int = 10
    emoji_set: str = "classic"
    broke_share: float = 0.1  # players who can afford only part of their guesses

    def __post_init__(self) -> None:
        if self.players < 1 or self.guesses < 1 or self.rounds < 1 or self.round_s <= 0:
            raise ConfigurationError("players, guesses and rounds must be >= 1, round_s > 0")


async def _make_players(pool: AsyncConnectionPool, opts: PlayOptions, tag: str) -> list[str]:
    full = opts.price * opts.guesses * opts.rounds
    rng = random.Random(tag)

    async def one(i: int) -> str:
        pid = f"sim-{tag}-{i:04d}"
        await ensure_player(pool, pid, name=f"player {i}")
        coins = full if rng.random() >= opts.broke_share else opts.price * rng.randint(1, full // opts.price)
        await grant_start(pool, pid, coins)
        return pid

    sem = asyncio.Semaphore(16)

    async def bounded(i: int) -> str:
        async with sem:
            return await one(i)

    return list(await asyncio.gather(*(bounded(i) for i in range(opts.players))))


def _typed(guess: list[str], rng: random.Random) -> str:
    """A guess the way people type it: spaced, comma-separated or run together."""
    return rng.choice((" ", "", ", ")).join(guess)


def guess_id(rid: str, player: str, n: int) -> str:
    """The id of ``player``'s guess number ``n`` in round ``rid``: the same in every run."""
    return derive_id("JOB", f"guess:{player}:{n}", rid)


async def run_players(services: Services, rid: str, players: list[str], guesses: int, tally: Tally,
                      on_submit: Callable[[], None] | None = None) -> None:
    """Every player submits ``guesses`` guesses to round ``rid``, all players concurrently."""
    rnd = await get_round(services.pool, rid)
    assert rnd is not None
    emoji_set = default_set(rnd.emoji_set)
    assert emoji_set is not None

    # Players are all concurrent, but at most IN_FLIGHT submissions run at once: every
    # charge of a round takes that round's row lock, so more only queue on the lock.
    gate = asyncio.Semaphore(IN_FLIGHT)

    async def player(pid: str) -> None:
        rng = random.Random(f"{pid}:{rid}")
        for n in range(guesses):
            guess = [rng.choice(emoji_set.emojis) for _ in range(6)]
            async with gate:
                outcome = await submit(services, rid, pid, _typed(guess, rng), guess_id=guess_id(rid, pid, n))
            if isinstance(outcome, Admitted):
                tally.admitted += 1
                tally.queued_late += not outcome.queued
            else:
                tally.rejected[outcome] += 1
                if outcome in (Reason.CLOSED, Reason.EXPIRED, Reason.INSUFFICIENT):
                    if on_submit:
                        on_submit()
                    break
            if on_submit:
                on_submit()

    started = time.monotonic()
    await asyncio.gather(*(player(p) for p in players))
    tally.submit_s += time.monotonic() - started


def _plan(opts: PlayOptions) -> RoundPlan:
    return RoundPlan(count=opts.rounds, duration_ms=int(opts.round_s * 1000), price=opts.price,
                     emoji_set=opts.emoji_set)


def game_record(opts: PlayOptions, tally: Tally) -> dict[str, object]:
    """What a data directory keeps of a game in flight (JSON)."""
    return {"run_tag": tally.run_tag, "series": tally.series, "round_ids": tally.round_ids,
            "player_ids": tally.player_ids, "finished": False,
            "options": {"players": opts.players, "guesses": opts.guesses, "rounds": opts.rounds,
                        "round_s": opts.round_s, "price": opts.price, "emoji_set": opts.emoji_set}}


def from_record(game: dict[str, object]) -> tuple[PlayOptions, Tally]:
    """The options and tally of a recorded game (ConfigurationError if it is not one)."""
    try:
        opts = PlayOptions(**game["options"])  # type: ignore[arg-type]
        tally = Tally(run_tag=str(game["run_tag"]), series=str(game["series"]),
                      round_ids=[str(r) for r in game["round_ids"]],  # type: ignore[attr-defined]
                      player_ids=[str(p) for p in game["player_ids"]])  # type: ignore[attr-defined]
    except (KeyError, TypeError) as exc:
        raise ConfigurationError(f"the recorded game is incomplete ({exc!r})") from exc
    if len(tally.round_ids) != opts.rounds or len(tally.player_ids) != opts.players:
        raise ConfigurationError("the recorded game does not match its options")
    return opts, tally


async def _readmit_next_open(services: Services, opts: PlayOptions, tally: Tally) -> None:
    """The open job of the first round not yet created, admitted again (its derived id makes
    this a DUPLICATE while the queue still holds it): a queue that lost it cannot stall the game."""
    row = await get_series(services.pool, tally.series)
    if row is not None:  # the series' own record says which round is next
        await kick(services, row)
        return
    for index, rid in enumerate(tally.round_ids):
        if await get_round(services.pool, rid) is None:
            p = _plan(opts)
            job = OpenRound(tally.series, rid, index, p.count, p.duration_ms, p.gap_ms, p.price,
                            p.emoji_set)
            await services.settlements.admit(derive_id("JOB", "open", rid), encode(job))
            return


async def _overdue_to_open(services: Services, tally: Tally, rid: str) -> bool:
    """Round ``rid`` should be open by now: the round before it closed over 5 s ago."""
    index = tally.round_ids.index(rid)
    if index == 0:
        return False
    before = await get_round(services.pool, tally.round_ids[index - 1])
    return before is not None and datetime.now(UTC) - before.closes_at > timedelta(seconds=5)


async def play(services: Services, opts: PlayOptions, console: Console, *, data: DataDir | None = None,
               resume: dict[str, object] | None = None) -> tuple[App, Tally, PlayOptions]:
    """Run the game (or, with ``resume``, the recorded game in flight): players, rounds,
    consumers. Returns once every round is settled and every notification delivered
    (the app is stopped)."""
    if resume is not None:
        opts, tally = from_record(resume)
        console.print(f"[bold]codemojex[/] resuming run {tally.run_tag}: {opts.players} players, "
                      f"{opts.guesses} guesses each per round, {opts.rounds} rounds of {opts.round_s:g}s")
    else:
        tally = Tally(run_tag=secrets.token_hex(3))
        console.print(f"[bold]codemojex[/] run {tally.run_tag}: {opts.players} players, "
                      f"{opts.guesses} guesses each per round, {opts.rounds} rounds of {opts.round_s:g}s")
        tally.player_ids = await _make_players(services.pool, opts, tally.run_tag)
    app = App(services)
    tree = asyncio.create_task(app.run())
    try:
        if resume is None:
            tally.series = ids.generate("SER")
            tally.round_ids = [round_id(tally.series, i) for i in range(opts.rounds)]
            if data is not None:  # recorded before the first round can open
                data.update(game=game_record(opts, tally))
            await schedule(services, _plan(opts), series=tally.series)
        else:
            await _readmit_next_open(services, opts, tally)
        await _drive(services, opts, tally, console)
    finally:
        app.stop()
        await tree
    return app, tally, opts


async def _drive(services: Services, opts: PlayOptions, tally: Tally, console: Console) -> None:
    rids = tally.round_ids
    total = opts.players * opts.guesses * opts.rounds
    columns = (TextColumn("{task.description:<22}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as bars:
        t_sub = bars.add_task("guesses submitted", total=total)
        t_score = bars.add_task("guesses scored", total=0)
        t_round = bars.add_task("rounds settled", total=opts.rounds)

        async def refresh() -> None:
            try:
                scored = await reads.count_scored(services.pool, rids)
                settled = await reads.count_settled(services.pool, rids)
            except DatabaseError:  # the bars wait for the database like everything else
                return
            bars.update(t_sub, completed=tally.submitted)
            bars.update(t_score, completed=scored, total=max(tally.admitted, scored))
            bars.update(t_round, completed=settled)

        # Ended by its flag: a cancel alone can be swallowed by a pool checkout (repeat_until).
        done = asyncio.Event()
        ticker = asyncio.create_task(repeat_until(done, refresh, every_s=0.2))
        try:
            for rid in rids:
                async def is_open(rid: str = rid) -> bool:
                    rnd = await get_round(services.pool, rid)
                    if rnd is None and await _overdue_to_open(services, tally, rid):
                        # Its open job is late: a failover may have lost it. Admit it again
                        # (a DUPLICATE while the queue still holds it).
                        await _readmit_next_open(services, opts, tally)
                    return rnd is not None and rnd.state == "open"

                rnd = await get_round(services.pool, rid)
                if rnd is not None and rnd.state != "open":
                    continue  # a resumed game: this round is over
                await wait_for(is_open, timeout_s=opts.round_s + 30, what=f"round {rid} to open")
                await run_players(services, rid, tally.player_ids, opts.guesses, tally)

            async def all_settled() -> bool:
                return await reads.count_settled(services.pool, rids) == len(rids)

            await wait_for(all_settled, timeout_s=opts.round_s + 120, every_s=0.1, what="settlement")

            async def drained() -> bool:
                s = await services.notifications.stats()
                return s.pending + s.active + s.delayed == 0

            await wait_for(drained, timeout_s=60, every_s=0.1, what="notifications")
        finally:
            done.set()
            ticker.cancel()
            await asyncio.gather(ticker, return_exceptions=True)
        bars.update(t_sub, completed=tally.submitted, total=tally.submitted)
        scored = await reads.count_scored(services.pool, rids)
        bars.update(t_score, completed=scored, total=max(scored, tally.admitted))
        bars.update(t_round, completed=len(rids))
