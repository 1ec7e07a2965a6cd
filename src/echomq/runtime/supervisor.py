"""A small supervisor for asyncio tasks, after OTP's (the game's tree in docs/architecture.md,
"The supervision tree of the game": ``one_for_one`` at the top, the cache tier ``rest_for_one``).

* Children start in list order and stop in reverse order.
* ``one_for_one``: a child that dies is restarted alone.
  ``rest_for_one``: a child that dies takes the children started after it down
  (in reverse order) and all of them start again, in order.
* Restart intensity: more than ``max_restarts`` within ``period_s`` and the
  supervisor gives up: it stops every child and raises :class:`SupervisorGaveUp`,
  so its own supervisor (or the process) sees the failure. Never silent.
* A child is a coroutine function; a :class:`Supervisor` is one too (its ``run``),
  so trees nest. ``restart="transient"`` children that return normally are not
  restarted; ``"permanent"`` ones always are.
* :func:`run_until_signal` runs a tree until SIGTERM or SIGINT, then stops it cleanly.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from echomq.core.errors import EchoMQError, InvalidArgument
from echomq.runtime.lease_table import cancel_and_wait, to_the_end

__all__ = ["ChildSpec", "Supervisor", "SupervisorGaveUp", "run_until_signal"]

log = logging.getLogger("echomq.runtime.supervisor")


class SupervisorGaveUp(EchoMQError):
    """Children died more often than the restart intensity allows."""


@dataclass(frozen=True, slots=True)
class ChildSpec:
    name: str
    start: Callable[[], Awaitable[None]]
    restart: Literal["permanent", "transient"] = "permanent"
    stop: Callable[[], None] | None = None  # a graceful stop; else the task is cancelled
    shutdown_s: float = 15.0


class Supervisor:
    def __init__(
        self,
        children: Sequence[ChildSpec],
        *,
        strategy: Literal["one_for_one", "rest_for_one"] = "one_for_one",
        max_restarts: int = 5,
        period_s: float = 10.0,
        name: str = "supervisor",
    ) -> None:
        if strategy not in ("one_for_one", "rest_for_one"):
            raise InvalidArgument(f"unknown strategy {strategy!r}")
        self.children = list(children)
        self.strategy = strategy
        self.max_restarts = max_restarts
        self.period_s = period_s
        self.name = name
        self.restarts: deque[float] = deque()
        self.restart_count = 0
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._stopping = asyncio.Event()
        self._changed = asyncio.Event()

    def task(self, name: str) -> asyncio.Task[None] | None:
        return self._tasks.get(name)

    def _start(self, spec: ChildSpec) -> None:
        task = asyncio.create_task(self._wrap(spec), name=f"{self.name}/{spec.name}")
        task.add_done_callback(lambda _: self._changed.set())
        self._tasks[spec.name] = task

    @staticmethod
    async def _wrap(spec: ChildSpec) -> None:
        await spec.start()

    async def _stop_child(self, spec: ChildSpec) -> None:
        """Its graceful stop and up to ``shutdown_s`` for it, then a cancel. Once begun,
        the stop ends with the child down even if this supervisor is cancelled meanwhile
        (that only cuts the graceful wait short); then the cancellation goes on. It used to
        be swallowed with the child's (``suppress(CancelledError)`` around ``await task``):
        a supervisor cancelled while it restarted children went on supervising, restarted
        them, and whoever cancelled it waited for ever."""
        task = self._tasks.pop(spec.name, None)
        if task is None or task.done():
            return
        try:
            if spec.stop is not None:
                spec.stop()
                await asyncio.wait({task}, timeout=spec.shutdown_s)
        finally:  # the child's own end (cancelled, failed) is retrieved there, not raised
            await to_the_end(cancel_and_wait([task]), what=f"{self.name}: stopping {spec.name}")

    async def _stop_all(self, specs: Sequence[ChildSpec]) -> None:
        for spec in reversed(specs):
            await self._stop_child(spec)

    def _note_restart(self) -> None:
        now = time.monotonic()
        self.restarts.append(now)
        self.restart_count += 1
        while self.restarts and now - self.restarts[0] > self.period_s:
            self.restarts.popleft()
        if len(self.restarts) > self.max_restarts:
            raise SupervisorGaveUp(
                f"{self.name}: more than {self.max_restarts} restarts in {self.period_s}s"
            )

    async def run(self) -> None:
        """Start the children in order and keep them running until :meth:`stop`."""
        for spec in self.children:
            self._start(spec)
            await asyncio.sleep(0)  # let it begin before the next one starts
        try:
            while not self._stopping.is_set():
                self._changed.clear()
                for index, spec in enumerate(self.children):
                    task = self._tasks.get(spec.name)
                    if task is None or not task.done():
                        continue
                    exc = None if task.cancelled() else task.exception()
                    if exc is None and spec.restart == "transient":
                        self._tasks.pop(spec.name)
                        continue
                    log.warning("%s: child %s exited (%r); restarting", self.name, spec.name, exc)
                    self._note_restart()
                    if self.strategy == "rest_for_one":
                        later = self.children[index + 1 :]
                        await self._stop_all(later)
                        for again in (spec, *later):
                            self._start(again)
                            await asyncio.sleep(0)
                    else:
                        self._start(spec)
                    break
                else:
                    stop = asyncio.ensure_future(self._stopping.wait())
                    change = asyncio.ensure_future(self._changed.wait())
                    try:
                        await asyncio.wait({stop, change}, return_when=asyncio.FIRST_COMPLETED)
                    finally:
                        stop.cancel()
                        change.cancel()
        finally:  # every child down before run() ends, even if it is cancelled again
            await to_the_end(self._stop_all(self.children), what=f"{self.name}: stopping")

    def stop(self) -> None:
        """Stop every child in reverse order; :meth:`run` returns when they are down."""
        self._stopping.set()


async def run_until_signal(supervisor: Supervisor) -> None:
    """Run ``supervisor`` until SIGTERM or SIGINT, then stop it cleanly."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, supervisor.stop)
    try:
        await supervisor.run()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
