"""The relay: admits guesses that were charged but never admitted (the outbox).

``submit`` commits the charge in PostgreSQL, then admits the job onto ``cm``. A
process that dies between the two leaves a paid guess with ``admitted_at IS
NULL``. The relay finds such guesses and admits them under their own JOB id, so
a guess that *was* admitted meanwhile is refused as a duplicate: the relay can
run any number of times, concurrently with ``submit`` and with other relays,
and each guess is still on the queue once. Then it marks them admitted.

Guarantee: every committed guess is admitted within about one ``interval_s``
after it is ``min_age_ms`` old, as long as Valkey and PostgreSQL are reachable.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import psycopg

from codemojex.domain.errors import DatabaseError
from codemojex.service.codec import GuessJob, encode
from codemojex.service.context import Services
from codemojex.wallet import mark_admitted, unadmitted
from echomq import EchoMQError, Verdict, ids

__all__ = ["Relay", "relay_once"]

log = logging.getLogger("codemojex.relay")


async def relay_once(services: Services, *, min_age_ms: int = 0, limit: int = 500) -> int:
    """One pass: admit and mark up to ``limit`` unadmitted guesses at least ``min_age_ms`` old.

    Younger guesses are skipped: their ``submit`` is most likely admitting them right
    now (admitting them too would be harmless, only wasted work). Returns how many
    guesses this pass marked admitted.
    """
    pending = await unadmitted(services.pool, limit=limit)
    cutoff = time.time() * 1000 - min_age_ms
    due = [g for g in pending if not ids.valid(g.id) or ids.timestamp_ms(g.id) <= cutoff]
    if not due:
        return 0
    items = [(g.id, encode(GuessJob(g.round_id, g.player, g.emojis)), g.player) for g in due]
    verdicts = await services.scores.admit_many(items, serial=True)
    done = []
    for g, verdict in zip(due, verdicts, strict=True):
        if verdict in (Verdict.ENQUEUED, Verdict.DUPLICATE):
            done.append(g.id)
        else:
            err = verdict if isinstance(verdict, EchoMQError) else verdict.value
            log.error("relay could not admit guess %s: %s", g.id, err)
    return await mark_admitted(services.pool, done)


class Relay:
    """The relay as a supervised child: :meth:`run` passes every ``interval_s`` until :meth:`stop`."""

    def __init__(self, services: Services, *, interval_s: float = 0.5, min_age_ms: int = 2000) -> None:
        self.services = services
        self.interval_s = interval_s
        self.min_age_ms = min_age_ms
        self.relayed = 0
        self._stopping = asyncio.Event()

    async def run(self) -> None:
        self._stopping.clear()
        while not self._stopping.is_set():
            try:
                self.relayed += await relay_once(self.services, min_age_ms=self.min_age_ms)
            except (OSError, EchoMQError, psycopg.Error, DatabaseError) as exc:
                log.warning("relay pass failed (%r); next pass in %.1fs", exc, self.interval_s)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.interval_s)

    def stop(self) -> None:
        self._stopping.set()
