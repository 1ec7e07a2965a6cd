"""A consumer's share of its queue's upkeep: one beat of promote, reap and retention.

Every beat each consumer of a queue races for the queue's upkeep token (``SET NX PX``
for one beat, :meth:`echomq.client._async.upkeep.AsyncUpkeep.take_token`); the one that gets it promotes due
delayed jobs, reaps expired leases, ends waiting jobs past their deadline ``expired``
(admit's ``expires_ms``, decision 0045) and, every ``trim_every`` of its beats, trims done,
dead and expired rows: no separate scheduler process. At ``maxmemory`` the token's ``SET`` is
refused (OOM) while promote and reap are not (their scripts are ``allow-oom``), so every
consumer runs them then (they are fenced: docs/decisions/0010); that refusal is also
how a consumer learns the server is full, logged once per episode and counted in
``stats.memory_full``.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING

from echomq.client.replies import classify
from echomq.runtime.consumer_options import ConsumerOptions, ConsumerStats

if TYPE_CHECKING:
    from echomq.client._async.queue import AsyncQueue

__all__ = ["UpkeepDuty"]

log = logging.getLogger("echomq.runtime.consumer")


class UpkeepDuty:
    """The upkeep beats of one consumer (``token`` names it in the race for the token)."""

    def __init__(self, queue: AsyncQueue, options: ConsumerOptions, stats: ConsumerStats,
                 name: str, token: str) -> None:
        self.queue, self.options, self.stats = queue, options, stats
        self.name, self.token = name, token
        self.beats = 0  # beats this consumer held the token
        self.full = False  # the server refuses the token's SET for memory (OOM)

    async def beat(self) -> None:
        """One beat; a failure is raised for the consumer to classify and ride out."""
        q, o = self.queue, self.options
        try:
            got = await q.upkeep.take_token(self.token, o.beat_ms)
        except Exception as exc:
            if classify(exc).code != "OOM":
                raise
            got = await self._memory_full(True)
        else:
            await self._memory_full(False)
        relayed = await q.flows.relay(q.name)  # every consumer, every beat: idempotent (0038)
        self.stats.flows_released += relayed.released
        self.stats.flows_failed += relayed.failed
        if not got:
            return
        self.beats += 1
        while await q.upkeep.promote() >= q.options.reap_batch:
            pass
        while True:
            reaped = sum(await q.upkeep.reap())
            self.stats.reaped += reaped
            if reaped < q.options.reap_batch:
                break
        while sum(await q.upkeep.expire()) >= q.options.reap_batch:
            pass
        if self.beats % o.trim_every == 0:
            await q.upkeep.trim()
            await q.flows.repair(q.name)

    async def _memory_full(self, full: bool) -> bool:
        """Log the start and end of an episode at ``maxmemory``; True while it lasts."""
        if full and not self.full:
            self.stats.memory_full += 1
            line = ""
            with contextlib.suppress(Exception):
                line = (await self.queue.upkeep.memory_status()).describe()
            log.warning("%s: the server is at its memory limit: admissions are refused, this "
                        "consumer keeps draining (%s)", self.name, line if line else "OOM")
        elif not full and self.full:
            log.warning("%s: the server is below its memory limit again", self.name)
        self.full = full
        return full
