"""A consumer of a sharded queue: one :class:`~echomq.runtime.consumer.Consumer` per shard.

Each shard has its own drain loop, its own wake subscription and its own share of the
concurrency (``ceil(concurrency / shards)`` slots), so

* no shard starves: a busy shard cannot take the slots of another;
* an idle consumer wakes on any shard: each shard's loop waits on that shard's wake
  channel, so a job admitted to any shard starts about one round trip later;
* an empty shard costs almost nothing: its loop sleeps on the wake channel and polls
  one peek per beat;
* a shard whose primary fails over stalls only its own loop (which rides the outage
  out); the others keep draining.

``hooks`` (:class:`~echomq.core.hooks.Hooks`) run around every shard's handler calls, as
around a plain :class:`~echomq.runtime.consumer.Consumer`'s: the same object is given to each
shard's consumer.

A shard refusing for its layout (another shard count, a retired shard) stops the whole
consumer with :class:`~echomq.core.errors.ShardCountMismatch`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os

from echomq.client._async.sharded import AsyncShardedQueue
from echomq.core.errors import EchoMQError, InvalidArgument
from echomq.core.hooks import Hooks
from echomq.protocol.sharding import translate
from echomq.runtime.consumer import Consumer, ConsumerOptions, ConsumerStats, Handler

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
        n = len(queue.shards)
        share = dataclasses.replace(self.options,
                                    concurrency=max(1, -(-self.options.concurrency // n)))
        self.name = name or f"{queue.name}@{os.getpid()}"
        self.consumers = [Consumer(shard, handler, options=share, name=f"{self.name}/{i}",
                                   hooks=self.hooks)
                          for i, shard in enumerate(queue.shards)]

    async def run(self) -> None:
        """Check the shard count, then run every shard's consumer until :meth:`stop`.
        If one ends with an error, the others are stopped and the error raised."""
        await self.queue.open()
        tasks = [asyncio.create_task(c.run(), name=c.name) for c in self.consumers]
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
