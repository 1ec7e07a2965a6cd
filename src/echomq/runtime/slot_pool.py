"""One pool of concurrency for the consumers that share it (a sharded queue's shards).

A plain :class:`~echomq.runtime.consumer.Consumer` has a pool of its own (nothing changes for
it). :class:`~echomq.runtime.sharded_consumer.ShardedConsumer` gives one pool of
``concurrency`` to the consumers of all its shards, so a shard with work may use every
free slot: a hot lane's shard drains at the whole consumer's concurrency, not ``1/N`` of
it (docs/decisions/0020-sharded-queues.md, point 4). The pool holds

* the **run slots**: at most ``size`` handlers run at once across the members (an
  ``async def`` handler's task takes one; a blocking handler runs on one of ``size``
  shared threads). A lease waiting for a slot is served in turn with the other members'
  waiting leases, never only its own consumer's;
* the **lease budget**: a member claims only what the pool has room for (``size`` leases,
  plus ``size`` more leased ahead while its backlog is deep, decision 0025). While other
  members wait for room, none leases ahead and each holds at most its share
  (``ceil(size / wanting)``), so a deep shard cannot starve a shallow one.
  Claims in flight count against it, so two members never both spend the same room,
  for at most a beat each: a claim stuck in the connector's retries (its shard's primary
  died) would otherwise starve every other member through the failover
  (docs/decisions/0052-two-flushes-in-flight.md, "Amendment");
* the **nudges**: a member that has work but no room registers its wake-up event; any
  member's event set (a handler finished, a verdict arrived) sets those events too, so a
  slot freed on one shard is taken by another without waiting for a beat.

A handed-off lease (decision 0018) arrives without asking the budget, so each member may
hold one lease beyond it; it still waits for a run slot: the run bound is strict.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from typing import Protocol

from echomq.core.model import Lease
from echomq.runtime._threads import DirectResult, HandlerThreads

__all__ = ["PoolKick", "SlotPool"]


class Member(Protocol):
    def held(self) -> int: ...


class Waiter(Protocol):
    def run_next(self) -> bool: ...


class PoolKick(asyncio.Event):
    """A member's wake-up event: setting it also wakes the members starved for room."""

    def __init__(self, pool: SlotPool) -> None:
        super().__init__()
        self._pool = pool

    def set(self) -> None:
        super().set()
        if self._pool.starved:
            self._pool.nudge()


class SlotPool:
    """Run slots, a lease budget and nudges shared by consumers (see the module)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.free = size  # run slots not taken
        self.claiming = 0  # leases asked for by claims in flight
        self.starved: dict[Member, asyncio.Event] = {}
        self._members: list[Member] = []
        self._waiting: collections.deque[Waiter] = collections.deque()
        self._threads: HandlerThreads | None = None
        self._routes: dict[str, Callable[[list[DirectResult]], None]] = {}

    # ------------------------------------------------------------ lease budget
    def join(self, member: Member) -> PoolKick:
        self._members.append(member)
        return PoolKick(self)

    def held(self) -> int:
        """Leases held by the members (finished ones excepted) and asked for in flight."""
        return sum(m.held() for m in self._members) + self.claiming

    def room(self, member: Member, *, ahead: int) -> int:
        """How many leases ``member`` may claim now: ``size`` in all, plus ``ahead`` when
        no other member waits for room. While ``k`` other members wait, it may hold no
        more than its share, ``ceil(size / (k + 1))``: the room freed goes to them."""
        others = len(self.starved) - (member in self.starved)
        if not others:
            return self.size + ahead - self.held()
        share = -(-self.size // (others + 1))
        return min(self.size - self.held(), share - member.held())

    def starve(self, member: Member, kick: asyncio.Event) -> None:
        """``member`` has work and no room: wake it when any member frees some."""
        self.starved[member] = kick

    def fed(self, member: Member) -> None:
        self.starved.pop(member, None)

    def nudge(self) -> None:
        for kick in self.starved.values():
            asyncio.Event.set(kick)  # the plain set: no nudge from a nudge

    # --------------------------------------------------------------- run slots
    def acquire(self) -> bool:
        """Take a slot for a new lease if one is free once the waiting leases are served
        (a waiter whose leases were taken back at stop is dropped here)."""
        self._serve()
        if self.free > 0:
            self.free -= 1
            return True
        return False

    def wait(self, waiter: Waiter) -> None:
        """``waiter`` holds leases waiting for a slot: :meth:`release` calls its
        ``run_next`` (which takes the slot with ``free -= 1`` and answers True, or answers
        False when it has nothing left to run)."""
        if waiter not in self._waiting:
            self._waiting.append(waiter)

    def release(self) -> None:
        """A handler is done: its slot goes to the next waiting lease, members in turn."""
        self.free += 1
        self._serve()

    def _serve(self) -> None:
        while self.free > 0 and self._waiting:
            waiter = self._waiting.popleft()
            if waiter.run_next():
                self._waiting.append(waiter)  # it may have more: behind the others

    # ------------------------------------------------------------------ threads
    def threads(self, loop: asyncio.AbstractEventLoop, queue: str,
                on_direct: Callable[[list[DirectResult]], None]) -> HandlerThreads:
        """The ``size`` handler threads shared by the members; a direct run's outcome goes
        to the member of the lease's queue."""
        self._routes[queue] = on_direct
        if self._threads is None:
            self._threads = HandlerThreads(self.size, loop, on_direct=self._deliver)
        return self._threads

    def leave_threads(self, queue: str) -> None:
        self._routes.pop(queue, None)
        if not self._routes and self._threads is not None:
            self._threads.close()
            self._threads = None

    def _deliver(self, results: list[DirectResult]) -> None:
        if len(self._routes) == 1:
            next(iter(self._routes.values()))(results)
            return
        by_queue: dict[str, list[DirectResult]] = {}
        for result in results:
            lease: Lease = result[0]
            by_queue.setdefault(lease.queue, []).append(result)
        for queue, mine in by_queue.items():
            route = self._routes.get(queue)
            if route is not None:
                route(mine)
