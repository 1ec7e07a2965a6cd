"""The game's metrics on a Prometheus endpoint (``codemojex bot --metrics-port N``).

=============================================  =========  ================================================
name                                           type       what
=============================================  =========  ================================================
``codemojex_guesses_charged_total``            counter    guesses charged, all time (PostgreSQL)
``codemojex_guesses_scored_total``             counter    charged guesses scored (PostgreSQL)
``codemojex_rounds``                           gauge      rounds by ``state``: open, closed, settled
``codemojex_rounds_stuck``                     gauge      rounds past their close + grace, unsettled
``codemojex_pot_coins``                        gauge      coins in the pots of unsettled rounds
``codemojex_payouts_coins_total``              counter    coins paid out, all time
``codemojex_series_paused``                    gauge      1 while an operator paused the series
``codemojex_messages_sent_total``              counter    messages Telegram accepted (this process)
``codemojex_messages_deferred_total``          counter    sends deferred, by ``reason``: ``429``,
                                                          ``stale`` (a lease too old), ``local`` (the
                                                          process's own window)
``codemojex_reconciler_actions_total``         counter    the reconciler's repairs, by ``action``
=============================================  =========  ================================================

The book values are read by the upkeep (:meth:`GameMetrics.refresh`, one query per
tick), never in the scrape; a scrape reports the last values read. A round stuck past
its close plus ``grace_s`` is also logged at WARNING, once per round, with its id, its
state and how long past its close it is.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from codemojex.wallet import live

__all__ = ["GameMetrics", "Sources"]

log = logging.getLogger("codemojex.bot.metrics")


@dataclass(slots=True)
class Sources:
    """Where the process's own counts come from (read at scrape time, plain ints)."""

    sent: Callable[[], int] = lambda: 0
    deferred: Callable[[], dict[str, int]] = dict
    reconciler: Callable[[], dict[str, int]] = dict
    paused: Callable[[], bool] = lambda: False
    extra: dict[str, Any] = field(default_factory=dict)


class GameMetrics(Collector):
    """The collector, the refresh duty and (optionally) the HTTP endpoint."""

    def __init__(self, pool: Any, sources: Sources, *, grace_s: int = 120) -> None:
        self.pool = pool
        self.sources = sources
        self.grace_s = grace_s
        self.stats: live.GameStats | None = None
        self.warned: set[str] = set()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        self.port: int | None = None
        self._server: Any = None

    async def refresh(self) -> None:
        """Read the books' figures (an upkeep duty) and warn about stuck rounds."""
        self.stats = await live.game_stats(self.pool, self.grace_s)
        for rid, state, late_s in self.stats.stuck:
            if rid not in self.warned:
                self.warned.add(rid)
                log.warning("round %s is stuck: %s, %.0f s past its close (grace %d s)", rid, state,
                            late_s, self.grace_s)

    def collect(self) -> Iterator[Any]:
        s = self.stats
        if s is not None:
            yield CounterMetricFamily("codemojex_guesses_charged", "Guesses charged, all time",
                                      value=s.charged)
            yield CounterMetricFamily("codemojex_guesses_scored", "Charged guesses scored", value=s.scored)
            rounds = GaugeMetricFamily("codemojex_rounds", "Rounds by state", labels=["state"])
            for state in ("open", "closed", "settled"):
                rounds.add_metric([state], s.rounds.get(state, 0))
            yield rounds
            yield GaugeMetricFamily("codemojex_rounds_stuck", "Rounds past close + grace, unsettled",
                                    value=len(s.stuck))
            yield GaugeMetricFamily("codemojex_pot_coins", "Coins in unsettled rounds' pots", value=s.pot)
            yield CounterMetricFamily("codemojex_payouts_coins", "Coins paid out, all time", value=s.paid)
        yield GaugeMetricFamily("codemojex_series_paused", "1 while the series is paused",
                                value=int(self.sources.paused()))
        yield CounterMetricFamily("codemojex_messages_sent", "Messages Telegram accepted",
                                  value=self.sources.sent())
        deferred = CounterMetricFamily("codemojex_messages_deferred", "Sends deferred", labels=["reason"])
        for reason, n in sorted(self.sources.deferred().items()):
            deferred.add_metric([reason], n)
        yield deferred
        actions = CounterMetricFamily("codemojex_reconciler_actions", "Reconciler repairs", labels=["action"])
        for action, n in sorted(self.sources.reconciler().items()):
            actions.add_metric([action], n)
        yield actions

    def serve(self, port: int, host: str = "127.0.0.1") -> int:
        """Serve ``/metrics`` on ``host:port`` (0: a free port) in a thread; the port."""
        self._server, _ = start_http_server(port, addr=host, registry=self.registry)
        self.port = int(self._server.server_address[1])
        return self.port

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
