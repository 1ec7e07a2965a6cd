"""The game half of the chaos run: players charging guesses while rounds open, close and settle.

The game's consumers run in a :mod:`codemojex.chaos.game_proc` process (the fault
injector kills it with kill -9 and starts another); the players submit through the
real :func:`codemojex.service.submit` from this process. At the end every round of
the series must settle, and the books must pass :func:`codemojex.game.report.check_run`
(the ledger sums to zero, no negative balance, every charged guess scored once,
every closed round settled once and paid as the sealed pass says).
"""

from __future__ import annotations

import asyncio
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from psycopg_pool import AsyncConnectionPool

from codemojex.domain.emoji import default_set
from codemojex.game.report import Checks, check_run
from codemojex.service import Admitted, RoundPlan, Services, round_id, schedule, submit
from codemojex.wallet import ensure_player, grant_start, reads
from echomq import end_with_parent

__all__ = ["GameWorkload"]


class GameWorkload:
    def __init__(self, services: Services, valkey_url: str, pg_url: str, logdir: Path, *,
                 players: int, rounds: int, round_s: float, price: int = 10, name: str = "game") -> None:
        self.name = name  # "game" on the single server, "game-cluster" on the cluster
        self.services = services
        self.valkey_url, self.pg_url, self.logdir = valkey_url, pg_url, logdir
        self.nplayers, self.rounds, self.round_s, self.price = players, rounds, round_s, price
        self.players: list[str] = []
        self.round_ids: list[str] = []
        self.proc: subprocess.Popen[bytes] | None = None
        self.admitted = 0
        self.rejected: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self._stop = asyncio.Event()
        self._seq = 0

    @property
    def pool(self) -> AsyncConnectionPool:
        return self.services.pool

    async def setup(self, rng: random.Random) -> None:
        tag = f"{rng.randrange(16**6):06x}"
        for i in range(self.nplayers):
            pid = f"chaos-{tag}-{i:03d}"
            await ensure_player(self.pool, pid, name=f"chaos {i}")
            # A tenth of the players can afford only a few guesses: refusals, never a debt.
            coins = self.price * (rng.randint(1, 5) if i % 10 == 0 else 100_000)
            await grant_start(self.pool, pid, coins)
            self.players.append(pid)
        series = await schedule(self.services, RoundPlan(
            count=self.rounds, duration_ms=int(self.round_s * 1000), price=self.price))
        self.round_ids = [round_id(series, i) for i in range(self.rounds)]

    def start_consumers(self) -> float:
        """Start the game's consumer process; returns when it is up (seconds taken)."""
        t0 = time.monotonic()
        self._seq += 1
        ready = self.logdir / f"{self.name}-{self._seq}.ready"
        log = open(self.logdir / f"{self.name}-{self._seq}.log", "wb")  # noqa: SIM115 (the child owns it)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "codemojex.chaos.game_proc", self.valkey_url, self.pg_url, str(ready)],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=end_with_parent())
        log.close()
        while not ready.exists() and self.proc.poll() is None and time.monotonic() - t0 < 60:
            time.sleep(0.02)
        return time.monotonic() - t0

    def kill_consumers(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop_consumers(self, timeout: float = 30.0) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    async def _open_round(self) -> str | None:
        return await reads.open_round_among(self.pool, self.round_ids)

    async def play(self, rng: random.Random, per_second: float = 20.0) -> None:
        """Players guess in whichever round of the series is open until :meth:`stop_playing`."""
        emojis = default_set("classic")
        assert emojis is not None
        while not self._stop.is_set():
            t0 = time.monotonic()
            try:
                rid = await self._open_round()
                if rid is not None:
                    guess = " ".join(rng.choice(emojis.emojis) for _ in range(6))
                    outcome = await submit(self.services, rid, rng.choice(self.players), guess)
                    if isinstance(outcome, Admitted):
                        self.admitted += 1
                    else:
                        self.rejected[outcome.value] += 1
            except Exception as exc:  # a fault under the submission: counted, never fatal
                self.errors[type(exc).__name__] += 1
            await asyncio.sleep(max(0.0, 1 / per_second - (time.monotonic() - t0)))

    def stop_playing(self) -> None:
        self._stop.set()

    async def settled(self) -> int:
        return await reads.count_settled(self.pool, self.round_ids)

    async def wallet_answers(self, since: float, limit_s: float = 60.0) -> float:
        """Seconds from ``since`` until a wallet query through the pool succeeds."""
        while time.monotonic() - since < limit_s:
            try:
                await reads.ping(self.pool)
                break
            except Exception as exc:
                self.errors[type(exc).__name__] += 1
                await asyncio.sleep(0.05)
        return time.monotonic() - since

    async def check(self) -> Checks:
        return await check_run(self.pool, self.round_ids)

    async def scoring_answers(self, since: float, limit_s: float = 60.0) -> float:
        """Seconds from ``since`` until the game's scoring queue answers again (its slot served:
        after a primary's kill, by the promoted replica)."""
        while time.monotonic() - since < limit_s:
            try:
                await self.services.scores.stats()
                break
            except Exception as exc:
                self.errors[type(exc).__name__] += 1
                await asyncio.sleep(0.05)
        return time.monotonic() - since
