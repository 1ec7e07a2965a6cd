"""Changing a sharded queue's shard count: drain-and-switch (docs/decisions/0020).

The old layout must be drained first (stop its producers, let its consumers empty it,
requeue or purge its dead jobs). :func:`reshard` then

1. refuses with :class:`QueueNotDrained` while any old shard holds a pending, active,
   delayed or dead job (nothing changed);
2. deletes the old shards' done rows (the window in which a resent id is refused as a
   duplicate starts again with the new layout);
3. retires each old shard: its meta records :data:`echomq.protocol.sharding.RETIRED` as its
   protocol, so every script a client still built with the old count runs there is
   refused by the version fence (reported as ShardCountMismatch). A job that reached a
   shard before it was retired is seen by the check that follows the retirement (no
   script can write there after it); then every shard retired so far is revived and
   the reshard refused with QueueNotDrained: nothing is stranded;
4. revives the new layout's shards if an earlier reshard had retired them;
5. records the new count: clients built with it may start.

One operator at a time: two concurrent reshards of one queue are not fenced against
each other.
"""

from __future__ import annotations

from echomq.client._async.cluster import AsyncClusterConnector
from echomq.client._async.connector import AsyncConnector
from echomq.client._async.queue import AsyncQueue
from echomq.client._async.sharded import AsyncShardedQueue
from echomq.core.errors import QueueNotDrained, QueueNotFound
from echomq.protocol.decoders import text
from echomq.protocol.sharding import RETIRED, ShardLayout, record_key, retired_marker

__all__ = ["reshard"]

_LIVE = ("pending", "active", "delayed", "dead")


async def _purge_done(shard: AsyncQueue) -> int:
    gone = 0
    while True:
        page = await shard.browse("done", limit=shard.options.batch)
        if not page:
            return gone
        gone += await shard.purge("done", [v.id for v in page])


async def _live(connector: AsyncConnector | AsyncClusterConnector, shard: AsyncQueue) -> int:
    return sum([int(await connector.command("ZCARD", shard.keys[s])) for s in _LIVE])


async def _revive(connector: AsyncConnector | AsyncClusterConnector, shard: AsyncQueue,
                  recorded: str | None) -> None:
    if recorded is None:
        await connector.command("HDEL", shard.keys["meta"], "protocol")
    else:
        await connector.command("HSET", shard.keys["meta"], "protocol", recorded)


async def reshard(connector: AsyncConnector | AsyncClusterConnector, name: str, *,
                  to: int) -> int:
    """Switch queue ``name`` to ``to`` shards (see the module doc); returns the old count.
    QueueNotFound if the queue was never sharded, QueueNotDrained if it still holds jobs."""
    new = ShardLayout(name, to)  # InvalidArgument before any I/O
    raw = await connector.command("HGET", record_key(name), "count")
    if raw is None:
        raise QueueNotFound(f"queue {name!r} is not a sharded queue (no {record_key(name)})")
    count = int(text(raw))
    if count == to:
        return count
    old = AsyncShardedQueue(connector, name, shards=count)
    await old.open()
    stats = await old.stats_by_shard()
    left = {s: sum(getattr(x, s) for x in stats) for s in _LIVE}
    if any(left.values()):
        raise QueueNotDrained(f"queue {name!r} still holds jobs in its {count} shards ("
                              + ", ".join(f"{n} {s}" for s, n in left.items() if n)
                              + "): drain it, requeue or purge the dead, then reshard")
    for shard in old.shards:
        await _purge_done(shard)
    retired: list[tuple[AsyncQueue, str | None]] = []
    for shard in old.shards:
        was = await connector.command("HGET", shard.keys["meta"], "protocol")
        await connector.command("HSET", shard.keys["meta"], "protocol", retired_marker(to))
        retired.append((shard, None if was is None else text(was)))
        if await _live(connector, shard):  # admitted before the retirement: undo it all
            for back, recorded in retired:
                await _revive(connector, back, recorded)
            raise QueueNotDrained(f"queue {name!r}: a job reached shard {shard.name!r} while "
                                  "resharding: stop the old producers, then reshard")
    for sub in new.names:
        shard = AsyncQueue(connector, sub)
        was = await connector.command("HGET", shard.keys["meta"], "protocol")
        if was is not None and text(was).startswith(RETIRED):
            await _revive(connector, shard, None)
    await connector.command("HSET", record_key(name), "count", to)
    return count

