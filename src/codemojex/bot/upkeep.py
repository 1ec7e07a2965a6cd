"""The bot's upkeep: one supervised loop for what the bot does on its own, every second.

* the series: :func:`~codemojex.service.series.start_series` once (start the bot's series
  or resume it: PostgreSQL keeps it, and the reconciler admits a lost open job again),
  then its status read every tick (the metrics show a paused series);
* the rate budget set again every ``BUDGET_EVERY_S`` (idempotent): a Valkey that came
  back without its data (an external server restarted empty) gets Telegram's limits
  back within that time, not at the bot's next start;
* the duties handed in (settlement messages, metrics, stuck-round warnings): each a
  coroutine function run once per tick.

A failing step (PostgreSQL or Valkey away) is logged and tried again next tick: the
loop never ends on its own, so the supervisor never counts it against its intensity.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from codemojex.bot.ratebudget import BudgetOptions, apply_budget
from codemojex.service import Services
from codemojex.service.series import SeriesSettings, SeriesStatus, series_status, start_series

__all__ = ["BUDGET_EVERY_S", "Upkeep"]

log = logging.getLogger("codemojex.bot.upkeep")

BUDGET_EVERY_S = 10.0
Duty = Callable[[], Awaitable[object]]


class Upkeep:
    """Runs the series keeper, the budget and ``duties`` every ``interval_s``."""

    def __init__(self, services: Services, budget: BudgetOptions, *, series: SeriesSettings | None = None,
                 duties: Sequence[tuple[str, Duty]] = (), interval_s: float = 1.0) -> None:
        self.services = services
        self.budget = budget
        self.series = series
        self.duties = list(duties)
        self.interval_s = interval_s
        self.started = asyncio.Event()  # the series begun (started or resumed)
        self.status: SeriesStatus | None = None
        self.ticks = 0
        self._stop = asyncio.Event()
        self._budget_at = 0.0
        self._failing: set[str] = set()

    async def _step(self, name: str, step: Duty) -> bool:
        try:
            await step()
        except Exception as exc:  # an outage: logged once per episode, tried next tick
            if name not in self._failing:
                log.warning("upkeep %s failed (%r); trying again every %.1fs", name, exc, self.interval_s)
            self._failing.add(name)
            return False
        if name in self._failing:
            log.info("upkeep %s works again", name)
            self._failing.discard(name)
        return True

    async def _budget(self) -> None:
        if time.monotonic() - self._budget_at >= BUDGET_EVERY_S:
            await apply_budget(self.services.notifications, self.budget)
            self._budget_at = time.monotonic()

    async def _begin(self) -> None:
        if self.series is not None and not self.started.is_set():
            status = await start_series(self.services, self.series)
            what = "started" if status.created else "resumed"
            log.info("series %s %s at round %d (%s)", status.id, what, status.next_index, status.settings)
            self.status = status
        self.started.set()

    async def _status(self) -> None:
        self.status = await series_status(self.services)

    @property
    def paused(self) -> bool:
        return self.status is not None and self.status.state == "paused"

    async def tick(self) -> None:
        await self._step("budget", self._budget)
        if not await self._step("series", self._begin):
            return
        if self.series is not None:
            await self._step("series", self._status)
        for name, duty in self.duties:
            await self._step(name, duty)
        self.ticks += 1

    async def run(self) -> None:
        self._stop.clear()
        while not self._stop.is_set():
            await self.tick()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.interval_s)

    def stop(self) -> None:
        self._stop.set()
