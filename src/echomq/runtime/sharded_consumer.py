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
their rebalancing toward the demand each beat (docs/decisions/0029-sharded-gate.md).

A shard refusing for its layout (another shard count, a retired shard) stops the whole
consumer with :class:`~echomq.core.errors.ShardCountMismatch`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os

from echomq.client._async import sharded_gate
from echomq.client._async.sharded import AsyncShardedQueue
from echomq.core.errors import EchoMQError, InvalidArgument
from echomq.core.hooks import Hooks
from echomq.protocol.sharding import translate
from echomq.runtime.consumer import Consumer, ConsumerOptions, ConsumerStats, Handler
from echomq.runtime.lease_table import cancel_and_wait
from echomq.runtime.slot_pool import SlotPool

log = logging.getLogger("echomq.runtime.sharded_consumer")

__all__ = ["ShardedConsumer"]


class ShardedConsumer:
    """Drain every shard of ``queue`` with ``handler``; run with ``await c.run()``."""

    def __init__(self, queue: AsyncShardedQueue, handler: Handler, *,
                 options: ConsumerOptions | None = None, name: str | None = None,
                 hooks: Hooks | None = None) -> None:
        if hooks is not None and not isinstance(hooks, Hooks):
            raise InvalidArgument(f"hooks must be echomq.Hooks, not {type(hooks).__name__}")
        self.queue = queue
        self.hooks = hooks or Hooks()
        self.options = options or ConsumerOptions()
        self.name = name or f"{queue.name}@{os.getpid()}"
        self.pool = SlotPool(self.options.concurrency)
        self.consumers = [Consumer(shard, handler, options=self.options, name=f"{self.name}/{i}",
                                   hooks=self.hooks, pool=self.pool)
                          for i, shard in enumerate(queue.shards)]

    async def run(self) -> None:
        """Check the shard count, then run every shard's consumer until :meth:`stop`.
        If one ends with an error, the others are stopped and the error raised."""
        await self.queue.open()
        tasks = [asyncio.create_task(c.run(), name=c.name) for c in self.consumers]
        shares = asyncio.create_task(self._rebalance(), name=f"{self.name}:shares") \
            if self.options.maintenance else None
        try:
            for done in asyncio.as_completed(tasks):
                try:
                    await done
                except EchoMQError as exc:
                    self.stop()
                    await asyncio.gather(*tasks, return_exceptions=True)
                    out = translate(exc, self.queue.name)
                    if out is exc:
                        raise
                    raise out from exc
        finally:
            for task in tasks:
                if not task.done():
                    self.stop(hurry=True)
            await asyncio.gather(*tasks, return_exceptions=True)
            if shares is not None:
                await cancel_and_wait([shares])

    async def _rebalance(self) -> None:
        """Each beat, one step of the rate limit's rebalancing (a no-op without a limit;
        one step at a time per queue across consumers: echomq.client._async.sharded_gate).
        A failure is the next beat's to retry: the shares only ever move safely."""
        every = max(self.options.beat_ms, 100) / 1000
        while True:
            await asyncio.sleep(every)
            try:
                await sharded_gate.rebalance(self.queue)
            except Exception as exc:
                log.debug("%s: rate shares not rebalanced this beat (%r)", self.name, exc)

    def stop(self, *, hurry: bool = False) -> None:
        for c in self.consumers:
            c.stop(hurry=hurry)

    @property
    def in_flight(self) -> int:
        return sum(c.in_flight for c in self.consumers)

    @property
    def stats(self) -> ConsumerStats:
        """The shards' counters summed."""
        total = ConsumerStats()
        for c in self.consumers:
            for f in dataclasses.fields(ConsumerStats):
                mine, theirs = getattr(total, f.name), getattr(c.stats, f.name)
                if isinstance(mine, dict):
                    for k, v in theirs.items():
                        mine[k] = mine.get(k, 0) + v
                else:
                    setattr(total, f.name, mine + theirs)
        return total
