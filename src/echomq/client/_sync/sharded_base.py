# Generated from echomq/client/_async/sharded_base.py by scripts/unasync_gen.py. Do not edit.
"""The layout half of a sharded queue: which shards it has now, and how it follows an
online reshard (docs/decisions/0032-online-reshard.md). :class:`ShardedBase` is the base
of :class:`~echomq.client._sync.sharded.ShardedQueue` (the routing and merging half).

* :meth:`open` records the count on a new queue or checks it, then adopts the layout the
  record names (count and epoch; a retired layout still moving in is :attr:`old`);
* a call refused by a retired shard waits for the record to name a newer layout, adopts
  it and runs again (:meth:`_following`; the refusal wrote nothing);
* a lease of a retired layout is stale (:meth:`_on_lease`, :meth:`_per_shard`): the
  reshard waited until no lease there was live.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, TypeVar

from echomq.client._fan import fan_out, fan_out_each
from echomq.client._sync.cluster import ClusterConnector
from echomq.client._sync.connector import Connector
from echomq.client._sync.queue import Queue
from echomq.core import ids as branded
from echomq.core.bounds import check_int
from echomq.core.errors import EchoMQError, InvalidArgument, ShardCountMismatch
from echomq.core.model import Lease, QueueOptions
from echomq.protocol import keyspace
from echomq.protocol.decoders import text
from echomq.protocol.reservations import WINDOW_MS
from echomq.protocol.resharding import Record, parse_record, rows_exist
from echomq.protocol.sharding import (
    RETIRED,
    SHARDED,
    ShardLayout,
    record_key,
    refusals,
    translate,
)

__all__ = ["FOLLOW_S", "ShardedBase"]

T = TypeVar("T")
FOLLOW_S = 30.0  # how long a call refused by a retired shard waits for the new layout
_SHARD_TAIL = re.compile(r"\d+/\d+(@\d+)?(~\d+)?")  # what ShardLayout puts after "name#"


class ShardedBase:
    """The layout of queue ``name`` over ``shards`` sub-queues, followed across reshards."""

    def __init__(
        self, connector: Connector | ClusterConnector, name: str, *, shards: int,
        options: QueueOptions | None = None, reserve_window_ms: int = WINDOW_MS,
    ) -> None:
        self.layout = ShardLayout(name, shards)
        # A reservation younger than this is left to its admission (decision 0040).
        self.reserve_window_ms = check_int("reserve_window_ms", reserve_window_ms, 0, 86_400_000)
        self.connector = connector
        self.name = name
        self.shards = [Queue(connector, sub, options=options) for sub in self.layout.names]
        self.options = self.shards[0].options
        self.old: list[Queue] = []  # a retired layout whose rows are still moving in
        self._opened = False

    def open(self) -> int:
        """Record the shard count on a new queue, or check it: ShardCountMismatch if the
        queue records another (one a reshard under way is moving from or to is accepted).
        Every other method calls it before its first call. The client then follows the
        recorded layout, also when an online reshard changes it (decision 0032)."""
        # The name's own meta first (the same slot as the record): it marks the name as
        # sharded, so every script a plain client runs on it is refused by its version fence;
        # a name a plain client already wrote to is refused here (its jobs would be stranded).
        meta = keyspace.queue_key(self.name, "meta")
        self.connector.command("HSETNX", meta, "protocol", SHARDED)
        held = self.connector.command("HGET", meta, "protocol")
        if held is None or text(held) != SHARDED:
            raise ShardCountMismatch(
                f"queue {self.name!r} is a plain queue (its meta records {text(held or b'')!r}): "
                "it cannot also be a sharded queue; drain it and delete its keys, or use "
                "another name")
        key = record_key(self.name)
        self.connector.command("HSETNX", key, "count", self.layout.count)
        rec = parse_record(self.name, self.connector.command("HGETALL", key))
        if rec is None:  # pragma: no cover - deleted between the two calls
            raise ShardCountMismatch(f"queue {self.name!r} lost its shard record")
        if not self._opened and self.layout.count not in {
                rec.count, *(x[0] for x in (rec.moving, rec.from_) if x)}:
            self.layout.check_count(rec.count)
        self._adopt(rec)
        self._opened = True
        return self.layout.count

    def _adopt(self, rec: Record) -> None:
        if rec.layout != self.layout:
            self.layout = rec.layout
            self.shards = [Queue(self.connector, sub, options=self.options)
                           for sub in self.layout.names]
        old = rec.old
        self.old = [] if old is None else [Queue(self.connector, sub, options=self.options)
                                           for sub in old.names]

    def _follow(self, exc: ShardCountMismatch) -> None:
        """A shard refused for a reshard: wait until the record names a newer layout
        (the reshard's move of the live jobs ends), adopt it; ``exc`` if it does not
        within :data:`FOLLOW_S`."""
        give_up = time.monotonic() + FOLLOW_S
        while True:
            rec = parse_record(self.name, self.connector.command(
                "HGETALL", record_key(self.name)))
            if rec is not None and rec.layout.epoch > self.layout.epoch:
                self._adopt(rec)
                return
            if time.monotonic() > give_up:
                raise exc
            time.sleep(0.02)

    def _following(self, op: Callable[[], T]) -> T:
        """``op()``, run again on the new layout after a reshard retired its shard (the
        refusal wrote nothing)."""
        self._ready()
        while True:
            try:
                with refusals(self.name):
                    return op()
            except ShardCountMismatch as exc:
                if RETIRED not in str(exc):
                    raise
                self._follow(exc)

    def _in_old(self, ids: Sequence[str]) -> set[str]:
        """The ids that have a row in the retired layout still moving in (one job per id
        across both: such an id is a DUPLICATE, its row on its way here)."""
        valid = list(dict.fromkeys(i for i in ids if isinstance(i, str) and branded.valid(i)))
        if not self.old or not valid:
            return set()
        got: list[Any] = fan_out([partial(s.connector.run, rows_exist(s.k, valid))
                                              for s in self.old])
        return {i for flags in got for i, f in zip(valid, flags, strict=True) if int(f)}

    def _ready(self) -> None:
        if not self._opened:
            self.open()

    def _of(self, lease: Lease) -> Queue | None:
        """The shard of ``lease``, or None for a lease of a retired layout of this queue
        (its job was handed on by a reshard: the lease is stale)."""
        if not isinstance(lease, Lease):
            raise InvalidArgument(f"expected a Lease, not {type(lease).__name__}")
        if lease.queue not in self.layout.names and lease.queue.startswith(self.name + "#") \
                and _SHARD_TAIL.fullmatch(lease.queue[len(self.name) + 1:]):
            return None
        return self.shards[self.layout.index_of_queue(lease.queue)]

    def _on_lease(self, lease: Lease, call: Callable[[Queue], T],
                        stale: T) -> T:
        """``call`` on the lease's shard; ``stale`` for a lease of a retired layout (a
        reshard waited until its layout held no live lease, so this one had expired)."""
        shard = self._of(lease)
        if shard is None:
            return stale
        try:
            with refusals(self.name):
                return call(shard)
        except ShardCountMismatch as exc:
            if RETIRED not in str(exc):
                raise
            return stale

    def _by_shard(self, leases: Sequence[Lease]) -> dict[int, list[int]]:
        """The leases by shard index (those of a retired layout left out: stale)."""
        groups: dict[int, list[int]] = {}
        for i, lease in enumerate(leases):
            shard = self._of(lease)
            if shard is not None:
                groups.setdefault(self.layout.index_of_queue(shard.name), []).append(i)
        return groups

    def _per_shard(self, leases: Sequence[Lease],
                         call: Callable[[Queue, list[int]], list[T]],
                         stale: T) -> list[T]:
        groups = sorted(self._by_shard(leases).items())
        got = fan_out_each([partial(call, self.shards[s], w) for s, w in groups])
        out: list[T] = [stale] * len(leases)
        for (_, where), answers in zip(groups, got, strict=True):
            if isinstance(answers, EchoMQError):
                exc = translate(answers, self.name)
                if isinstance(exc, ShardCountMismatch) and RETIRED in str(exc):
                    continue  # a retired shard: its leases are stale
                raise exc
            for i, a in zip(where, answers, strict=True):
                out[i] = a
        return out

    def _record(self) -> Record:
        rec = parse_record(self.name, self.connector.command(
            "HGETALL", record_key(self.name)))
        if rec is None:  # pragma: no cover - the record is never deleted
            raise ShardCountMismatch(f"queue {self.name!r} lost its shard record")
        return rec

