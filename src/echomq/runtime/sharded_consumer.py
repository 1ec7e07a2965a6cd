"""A consumer of a sharded queue: one :class:`~echomq.runtime.consumer.Consumer` per shard.

Each shard has its own drain loop and its own wake subscription; the concurrency is one
pool for all of them (:mod:`echomq.runtime.slot_pool`), so

* a shard with work may use every free slot: all the work on one shard (one hot lane)
  drains at the whole ``concurrency``, and never more than ``concurrency`` handlers run
  at once across the shards (test_one_hot_shard_runs_at_the_whole_concurrency);
* no shard starves: a shard that waits for room stops the others leasing ahead, and a
  freed slot is offered to the shards' waiting leases in turn;
* an idle consumer wakes on any shard: each shard's loop waits on that shard's wake
  channel, so a job admitted to any shard starts about one round trip later;
* an empty shard costs almost nothing: its loop sleeps on the wake channel and polls
  one peek per beat;
* a shard whose primary fails over stalls only its own loop (which rides the outage
  out); the others keep draining.

``hooks`` (:class:`~echomq.core.hooks.Hooks`) run around every shard's handler calls, as
around a plain :class:`~echomq.runtime.consumer.Consumer`'s: the same object is given to each
shard's consumer.

A rate limit set on the logical queue (:meth:`AsyncShardedQueue.set_limits`) is kept as
shares of the shards; while it runs with ``maintenance``, the consumer takes one step of
their rebalancing toward the demand each beat (docs/decisions/0031-sharded-gate.md).

A shard refusing for its layout (another shard count, a retired shard) stops the whole
consumer with :class:`~echomq.core.errors.ShardCountMismatch`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from typing import Any

from echomq.client._async import sharded_gate
from echomq.client._async.reservations import sweep
from echomq.client._async.reshard import read_record, repair
from echomq.client._async.sharded import AsyncShardedQueue
from echomq.core.errors import EchoMQError, InvalidArgument, ShardCountMismatch
from echomq.core.hooks import Hooks
from echomq.protocol.sharding import RETIRED, translate
from echomq.runtime.consumer import Consumer, ConsumerOptions, ConsumerStats, Handler
from echomq.runtime.lease_table import cancel_and_wait, raise_lost_cancel
from echomq.runtime.slot_pool import SlotPool

log = logging.getLogger("echomq.runtime.sharded_consumer")

__all__ = ["ShardedConsumer"]


class ShardedConsumer:
    """Drain every shard of ``queue`` with ``handler``; run with ``await c.run()``."""

    def __init__(self, queue: AsyncShardedQueue, handler: Handler | str, *,
                 options: ConsumerOptions | None = None, name: str | None = None,
                 hooks: Hooks | None = None) -> None:
        if hooks is not None and not isinstance(hooks, Hooks):
            raise InvalidArgument(f"hooks must be echomq.Hooks, not {type(hooks).__name__}")
        self.queue = queue
        self.handler = handler
        self.hooks = hooks or Hooks()
        self.options = options or ConsumerOptions()
        self.name = name or f"{queue.name}@{os.getpid()}"
        self._stopped = False
        self._hurry = False
        self._past: list[ConsumerStats] = []  # the counters of the layouts followed before
        self._build()

    def _build(self) -> None:
        """One consumer per shard of the queue's current layout, one pool for all."""
        self.pool = SlotPool(self.options.concurrency)
        self.consumers = [Consumer(shard, self.handler, options=self.options,
                                   name=f"{self.name}/{i}", hooks=self.hooks, pool=self.pool)
                          for i, shard in enumerate(self.queue.shards)]

    async def run(self) -> None:
        """Check the shard count, then run every shard's consumer until :meth:`stop`.
        If one ends with an error, the others are stopped and the error raised. When an
        online reshard switches the queue to a new layout (decision 0032), the consumers
        of the old one stop (the reshard waited until they held nothing) and consumers
        of the new one start."""
        await self.queue.open()
        raise_lost_cancel()  # a cancel a redis-py call dropped: not run forever
        if [c.queue for c in self.consumers] != self.queue.shards:
            self._build()
        aux = asyncio.create_task(self._upkeep(), name=f"{self.name}:upkeep") \
            if self.options.maintenance else None
        try:
            while await self._generation():
                self._past.append(self._sum(self.consumers))
                self._build()
        finally:
            if aux is not None:
                await cancel_and_wait([aux])

    async def _generation(self) -> bool:
        """Run the consumers of one layout; True when the layout changed under them."""
        raise_lost_cancel()  # also after following a new layout (its reads may drop one)
        tasks: list[asyncio.Task[Any]] = [asyncio.create_task(c.run(), name=c.name)
                                          for c in self.consumers]
        watch: asyncio.Task[Any] = asyncio.create_task(self._watch(), name=f"{self.name}:layout")
        if self._stopped:
            self.stop(hurry=self._hurry)
        moved = False
        every: list[asyncio.Task[Any]] = [*tasks, watch]
        try:
            for done in asyncio.as_completed(every):
                try:
                    if await done is True:  # the watcher saw a new layout
                        moved = True
                        self._stop_current()
                except EchoMQError as exc:
                    out = translate(exc, self.queue.name)
                    if not (isinstance(out, ShardCountMismatch) and RETIRED in str(out)):
                        self.stop()
                        await asyncio.gather(*tasks, return_exceptions=True)
                        if out is exc:
                            raise
                        raise out from exc
                    # A shard was retired: follow the reshard; once stopped, just end (the
                    # reshard waited until the old layout held nothing: a stop that met the
                    # retirement in a shard consumer's last upkeep raised it, in a loaded run).
                    if not self._stopped:
                        moved = True
                        self._stop_current()
                if all(t.done() for t in tasks):
                    break
        finally:
            for task in tasks:
                if not task.done():
                    self._stop_current(hurry=True)
            try:
                await asyncio.gather(*tasks, return_exceptions=True)
            finally:  # also when run() is cancelled again meanwhile: it used to poll on
                await cancel_and_wait([watch])
        if not moved or self._stopped:
            return False
        await self.queue._follow(ShardCountMismatch(
            f"queue {self.queue.name!r}: a shard was retired but no new layout was recorded"))
        return True

    async def _watch(self) -> bool:
        """Each beat, read the queue's record: True once it names a newer layout."""
        every = max(self.options.beat_ms, 50) / 1000
        epoch = self.queue.layout.epoch
        while True:
            await asyncio.sleep(every)
            try:
                rec = await read_record(self.queue.connector, self.queue.name)
            except Exception as exc:
                log.debug("%s: layout not read this beat (%r)", self.name, exc)
                continue
            if rec is not None and rec.epoch > epoch:
                return True

    async def _upkeep(self) -> None:
        """Each beat, one step of the rate limit's rebalancing (a no-op without a limit;
        one step at a time per queue across consumers: echomq.client._async.sharded_gate),
        and the repair of a reshard its operator left unfinished (a no-op unless the
        record says one is under way and no mover holds its token: reshard.repair); once
        per repair window, a pass of the sweep of reservations whose job is gone
        (reservations.sweep, decision 0040).
        A failure is the next beat's to retry: the shares only ever move safely."""
        every = max(self.options.beat_ms, 100) / 1000
        loop_time = asyncio.get_running_loop().time
        last = loop_time()
        while True:
            await asyncio.sleep(every)
            try:
                await sharded_gate.rebalance(self.queue)
                await repair(self.queue.connector, self.queue.name)
                if loop_time() - last >= self.queue.reserve_window_ms / 1000:
                    last = loop_time()
                    await sweep(self.queue)
            except Exception as exc:
                log.debug("%s: upkeep of the layout not done this beat (%r)", self.name, exc)

    def _stop_current(self, *, hurry: bool = False) -> None:
        for c in self.consumers:
            c.stop(hurry=hurry)

    def stop(self, *, hurry: bool = False) -> None:
        self._stopped = True
        self._hurry = self._hurry or hurry
        self._stop_current(hurry=self._hurry)

    @property
    def in_flight(self) -> int:
        return sum(c.in_flight for c in self.consumers)

    @property
    def stats(self) -> ConsumerStats:
        """The shards' counters summed (with those of the layouts followed before)."""
        return self._sum(self.consumers, *self._past)

    @staticmethod
    def _sum(consumers: list[Consumer], *more: ConsumerStats) -> ConsumerStats:
        total = ConsumerStats()
        for st in [*(c.stats for c in consumers), *more]:
            for f in dataclasses.fields(ConsumerStats):
                mine, theirs = getattr(total, f.name), getattr(st, f.name)
                if isinstance(mine, dict):
                    for k, v in theirs.items():
                        mine[k] = mine.get(k, 0) + v
                else:
                    setattr(total, f.name, mine + theirs)
        return total
