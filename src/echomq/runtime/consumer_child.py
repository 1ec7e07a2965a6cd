"""A consumer as a supervised child: every start is a fresh :class:`Consumer`, stats add up.

A :class:`~echomq.runtime.supervisor.Supervisor` restarts a child by calling its start
function again. A :class:`Consumer` that ended (a crash, a stop) is not reused:
:meth:`ConsumerChild.run` builds a new one over the same queue, handler and
options (and ``hooks``), so a restart starts from clean state (no half-open lease table), and
the jobs the old one held come back when their leases expire.

:attr:`ConsumerChild.stats` is the sum over every consumer this child ran, the
one running now included: counters add, and the per-code refusal counts add
code by code. :meth:`ConsumerChild.spec` gives the child's :class:`ChildSpec`,
with a graceful stop and a shutdown bound one second past the consumer's grace
period (so the supervisor cancels only a consumer that outlived its own grace).
"""

from __future__ import annotations

import dataclasses

from echomq.client._async.queue import AsyncQueue
from echomq.client._async.sharded import AsyncShardedQueue
from echomq.core.hooks import Hooks
from echomq.runtime.consumer import Consumer, ConsumerOptions, ConsumerStats, Handler
from echomq.runtime.sharded_consumer import ShardedConsumer
from echomq.runtime.supervisor import ChildSpec

__all__ = ["ConsumerChild", "add_stats"]


def add_stats(total: ConsumerStats, more: ConsumerStats) -> None:
    """Add ``more`` into ``total``, field by field (a dict field adds key by key)."""
    for f in dataclasses.fields(ConsumerStats):
        mine, theirs = getattr(total, f.name), getattr(more, f.name)
        if isinstance(mine, dict):
            for key, count in theirs.items():
                mine[key] = mine.get(key, 0) + count
        else:
            setattr(total, f.name, mine + theirs)


class ConsumerChild:
    """A consumer of ``queue`` with ``handler`` that a supervisor may restart any number of times."""

    def __init__(self, queue: AsyncQueue | AsyncShardedQueue, handler: Handler | str,
                 options: ConsumerOptions | None = None, *, name: str | None = None,
                 hooks: Hooks | None = None) -> None:
        self.queue = queue
        self.hooks = hooks
        self.handler = handler
        self.options = options or ConsumerOptions()
        self.name = name
        self.current: Consumer | ShardedConsumer | None = None
        self.starts = 0
        self._past = ConsumerStats()  # the sum over the consumers that ended

    async def run(self) -> None:
        """Run a new consumer until it stops or fails (a supervisor's start function)."""
        if self.current is not None:
            add_stats(self._past, self.current.stats)
        if isinstance(self.queue, AsyncShardedQueue):  # one consumer per shard
            self.current = ShardedConsumer(self.queue, self.handler, options=self.options,
                                           name=self.name, hooks=self.hooks)
        else:
            self.current = Consumer(self.queue, self.handler, options=self.options, name=self.name,
                                    hooks=self.hooks)
        self.starts += 1
        await self.current.run()

    def stop(self) -> None:
        """Ask the running consumer to stop (it finishes in-flight work within its grace)."""
        if self.current is not None:
            self.current.stop()

    @property
    def stats(self) -> ConsumerStats:
        """Every consumer's stats added up, the running one's included (a fresh object)."""
        total = ConsumerStats()
        add_stats(total, self._past)
        if self.current is not None:
            add_stats(total, self.current.stats)
        return total

    def spec(self, name: str) -> ChildSpec:
        """This child under ``name``: restarted on failure, stopped gracefully."""
        return ChildSpec(name, self.run, stop=self.stop, shutdown_s=self.options.grace_s + 1)
