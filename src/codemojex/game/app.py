"""The composition root: one ``one_for_one`` supervision tree for the game
(docs/architecture.md, the supervision tree of the game).

The children list reads as the dependency order (each child only produces work
for children started before it, so nothing is produced before its consumer runs):

1. ``cache``   the cache tier, itself a ``rest_for_one`` tree (directory, games, emoji_sets)
2. ``notify``  drains ``cm.notify`` (beat 50 ms, lease 15 s; 250 ms for the console)
3. ``score``   drains ``cm`` (beat 250 ms, lease 10 s); produces notifications (a score
   note per player per round at a time, decision 0049)
4. ``settle``  drains ``cm-settle`` (beat 100 ms, lease 10 s); opens and settles rounds
5. ``relay``   echomq's outbox relay on the game's outbox (``cm_outbox``): admits the
   job of a charged guess whose row is over ``RELAY_MIN_AGE_MS`` old (its charge's own
   admission did not happen: a process died in between), once (decision 0034); the
   charges admit their jobs themselves and the scorer deletes the rows of scored guesses
6. ``reconcile`` requeues dead game jobs once PostgreSQL answers, re-admits charged
   guesses whose job was lost after its admission, and drives every round past its
   closing time to settled (:mod:`codemojex.service.reconcile`)

A child that dies is restarted alone (a consumer restarts as a new ``Consumer``;
the jobs it held come back when their leases expire). Stop with :meth:`App.stop`
or run it with :func:`echomq.runtime.supervisor.run_until_signal`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from codemojex.infra.pg import conninfo_of
from codemojex.service.cache import CacheTier
from codemojex.service.codec import GuessJob
from codemojex.service.context import Services
from codemojex.service.reconcile import Reconciler
from codemojex.service.scorenotes import NOTE_DELAY_MS
from codemojex.wallet import OUTBOX
from codemojex.workers import notify, score, settle
from codemojex.workers.notify import ConsoleDelivery, Delivery, NotifyWorker
from codemojex.workers.score import ScoreWorker
from codemojex.workers.settle import SettleWorker
from echomq import ChildSpec, ConsumerChild, ConsumerOptions, Supervisor, outbox

__all__ = ["RELAY_MIN_AGE_MS", "App"]

RELAY_MIN_AGE_MS = 5_000  # far above a commit-to-admission gap; a crash's guesses wait this long


class App:
    """The game's tree over ``services``. ``delivery`` defaults to a quiet console."""

    def __init__(self, services: Services, *, delivery: Delivery | None = None,
                 reconciler: Reconciler | None = None,
                 options: dict[str, ConsumerOptions] | None = None,
                 on_score: Callable[[str, GuessJob, int], Awaitable[object]] | None = None,
                 note_delay_ms: int = NOTE_DELAY_MS) -> None:
        if services.cache is None:
            services.cache = CacheTier(services.connector, suffix=services.suffix)
        self.services = services
        self.cache = services.cache
        self.delivery = delivery or ConsoleDelivery(write=None)
        self.scorer = ScoreWorker(services, on_score=on_score, note_delay_ms=note_delay_ms)
        self.settler = SettleWorker(services)
        self.notifier = NotifyWorker(self.delivery, pool=services.pool)
        # The charges admit their jobs at once (codemojex.service.charges) and the scorer deletes
        # a scored guess's row: the relay only takes rows RELAY_MIN_AGE_MS old, the ones a
        # process that died between a commit and its admission left, never every row twice.
        self.relay = outbox.OutboxRelay(conninfo_of(services.pool), services.connector, table=OUTBOX.name,
                                        min_age_ms=RELAY_MIN_AGE_MS)
        self._relay_stop = asyncio.Event()
        # Scores told in batches (``on_score``) have no note per guess for it to look for.
        self.reconciler = reconciler or Reconciler(services, renotify=on_score is None)
        # ``options`` overrides a consumer's options by child name (tests shorten backoffs).
        opts = {"notify": notify.OPTIONS if delivery else notify.LOCAL_OPTIONS, "score": score.OPTIONS,
                "settle": settle.OPTIONS}
        opts |= options or {}
        self.consumers = {
            "notify": ConsumerChild(services.notifications, self.notifier.handle, opts["notify"]),
            "score": ConsumerChild(services.scores, self.scorer.handle, opts["score"]),
            "settle": ConsumerChild(services.settlements, self.settler.handle, opts["settle"]),
        }
        cache_tree = self.cache.supervisor()
        self.supervisor = Supervisor(
            [
                ChildSpec("cache", cache_tree.run, stop=cache_tree.stop, shutdown_s=5.0),
                self.consumers["notify"].spec("notify"),
                self.consumers["score"].spec("score"),
                self.consumers["settle"].spec("settle"),
                ChildSpec("relay", self._relay, stop=self._relay_stop.set, shutdown_s=5.0),
                ChildSpec("reconcile", self.reconciler.run, stop=self.reconciler.stop, shutdown_s=5.0),
            ],
            strategy="one_for_one",
            name="codemojex",
        )

    async def _relay(self) -> None:
        self._relay_stop.clear()
        try:
            await self.relay.run(self._relay_stop)
        finally:
            await self.relay.aclose()

    async def run(self) -> None:
        """Run the tree until :meth:`stop`."""
        await self.supervisor.run()

    def stop(self) -> None:
        self.supervisor.stop()

    @property
    def children(self) -> list[str]:
        return [c.name for c in self.supervisor.children]

