"""Changing a sharded queue's shard count online, while producers and consumers run
(docs/decisions/0032-online-reshard.md; the record's fields: echomq.protocol.resharding).

:func:`reshard` moves queue ``q`` from layout ``L = (N, e)`` to ``L' = (M, e + 1)``
(new shard names: a retired name never serves again):

1. **Prepare** (record ``moving = M:e+1``): pause every shard of ``L`` (claims stop,
   admissions go on into ``L``); wait until no job of ``L`` is active (running handlers
   finish and complete; expired leases are reaped) and, under a rate limit, one window
   more; give ``L'`` its rate shares, its lane limit and the pause the operator had set.
2. **Retire and move the live jobs**: every shard of ``L`` records the retired marker, so
   every script there is refused from now on (a client still on ``L`` learns the new
   layout from that refusal and retries: nothing was written); then each pending and
   delayed job is copied into its shard of ``L'`` (``import_row``: placed as an admission
   places it, a serial lane's hold kept; a laned job away from its id's new home is
   reserved there, decision 0040) and only then removed from ``L`` (``unload_row``).
   Admissions wait during this step only.
3. **Switch** (one ``HSET``): ``count = M``, ``epoch = e + 1``, ``from = N:e``. Clients
   and consumers follow ``L'``. An admission first asks ``L``'s shards whether the id has
   a row there (``rows_exist``): one job per id across both layouts.
4. **Move the finished rows** (done and dead: results and the dedupe window are kept,
   their scores too), copy then remove, in batches; then drop ``from``: the reshard is
   committed.

Every step is idempotent and the record says where a reshard stands, so a reshard that
crashed is finished by any :class:`~echomq.runtime.sharded_consumer.ShardedConsumer`'s
upkeep (:func:`repair`, under the ``emq:{q}:reshard`` token) or by running ``reshard``
again. One reshard at a time: the token refuses a second (QueueNotDrained).
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from echomq.client._async.cluster import AsyncClusterConnector
from echomq.client._async.connector import AsyncConnector
from echomq.client._async.queue import AsyncQueue
from echomq.core.errors import EchoMQError, QueueNotDrained, QueueNotFound, ShardCountMismatch
from echomq.core.model import QueueOptions
from echomq.protocol import keyspace
from echomq.protocol.decoders import text
from echomq.protocol.gate import RateLimit
from echomq.protocol.keyspace import QueueKeys
from echomq.protocol.reservations import RESERVED, reserve
from echomq.protocol.resharding import Record, import_row, parse_record, unload_row
from echomq.protocol.shard_limits import MARGIN_MS, check_budget, split
from echomq.protocol.sharding import RETIRED, ShardLayout, record_key, retired_marker

__all__ = ["read_record", "repair", "reshard"]

Conn = AsyncConnector | AsyncClusterConnector
TOKEN_MS = 30_000  # the reshard token's life, renewed by every step of the mover
BATCH = 200  # rows moved per step of the finished rows
_LIVE = ("pending", "delayed")
_DONE = ("done", "dead", "expired")
_AUX = ("lanes", "inflight", "rate", "lane_rate", "lane_seen", "parked", "maint", "wake",
        "reserved", "expiring")


def _token_key(name: str) -> str:
    return keyspace.queue_key(name, "reshard")


async def read_record(conn: Conn, name: str) -> Record | None:
    return parse_record(name, await conn.command("HGETALL", record_key(name)))


class _Mover:
    """One mover of one queue, holding the reshard token while it works."""

    def __init__(self, conn: Conn, name: str) -> None:
        self.conn, self.name = conn, name
        self.token = f"{os.getpid()}:{id(self)}:{time.time()}"

    async def take(self) -> bool:
        got = await self.conn.command("SET", _token_key(self.name), self.token, "NX", "PX",
                                      TOKEN_MS)
        return got is not None

    async def renew(self) -> None:
        """Keep the token (a mover whose token another took stops: QueueNotDrained)."""
        held = await self.conn.command("GET", _token_key(self.name))
        if held is None or text(held) != self.token:
            raise QueueNotDrained(f"queue {self.name!r}: another mover took over the reshard")
        await self.conn.command("PEXPIRE", _token_key(self.name), TOKEN_MS)

    async def release(self) -> None:
        held = await self.conn.command("GET", _token_key(self.name))
        if held is not None and text(held) == self.token:
            await self.conn.command("DEL", _token_key(self.name))

    def shards(self, layout: ShardLayout) -> list[AsyncQueue]:
        return [AsyncQueue(self.conn, sub, options=QueueOptions()) for sub in layout.names]

    # ------------------------------------------------------------- phase 1
    async def prepare(self, rec: Record, target: ShardLayout, wait_s: float) -> bool:
        """Pause ``rec``'s layout, wait for its active jobs, set up ``target``. True when
        ready to retire; False if the active jobs did not end within ``wait_s`` (then the
        layout is resumed as it was and ``moving`` dropped)."""
        old = self.shards(rec.layout)
        fields = {text(k): text(v) for k, v in
                  (await self.conn.command("HGETALL", record_key(self.name))).items()}
        retired = [(await self.conn.command("HGET", x.keys["meta"], "protocol")) or b""
                   for x in old]
        if any(text(r).startswith(RETIRED) for r in retired):
            old = []  # a mover that crashed had begun retiring: the waiting was done
        if "paused_by_user" not in fields:
            user = any([(await s.gate()).paused for s in old])
            await self.conn.command("HSET", record_key(self.name), "paused_by_user", int(user))
            fields["paused_by_user"] = str(int(user))
        for shard in old:
            await shard.pause()
        rate_ms = int(fields.get("rate_ms", "0"))
        quiet_until = time.monotonic() + (rate_ms + MARGIN_MS) / 1000 if rate_ms and old else 0.0
        give_up = time.monotonic() + wait_s
        while True:
            await self.renew()
            active = 0
            for shard in old:
                await shard.reap()
                active += int(await self.conn.command("ZCARD", shard.keys["active"]))
            if not active and time.monotonic() >= quiet_until:
                break
            if time.monotonic() > give_up:
                if fields["paused_by_user"] != "1":
                    for shard in old:
                        await shard.resume()
                await self.conn.command("HDEL", record_key(self.name), "moving", "paused_by_user")
                return False
            await asyncio.sleep(0.02)
        new = self.shards(target)
        lane = RateLimit(int(fields["lane_max"]), int(fields["lane_ms"])) \
            if fields.get("lane_max") else None
        if fields.get("rate_max"):
            shares = split(int(fields["rate_max"]), [0] * target.count)
            for shard, share in zip(new, shares, strict=True):
                await shard.set_limits(rate=RateLimit(share, rate_ms), lane_rate=lane)
        elif lane is not None:
            for shard in new:
                await shard.set_limits(lane_rate=lane)
        for shard in new:
            await (shard.pause() if fields["paused_by_user"] == "1" else shard.fence())
        return True

    # ------------------------------------------------------------- phase 2
    async def retire(self, rec: Record, target: ShardLayout) -> None:
        for shard in self.shards(rec.layout):
            await self.conn.command("HSET", shard.keys["meta"], "protocol",
                                    retired_marker(target.count))

    async def move(self, source: ShardLayout, target: ShardLayout, states: tuple[str, ...],
                   limit: int | None) -> int:
        """Copy then remove up to ``limit`` rows of ``states`` from ``source`` into
        ``target`` (all with None), in set order, a page at a time; the number moved."""
        moved = 0
        new = self.shards(target)
        for shard in self.shards(source):
            for state in states:
                while limit is None or moved < limit:
                    take = BATCH if limit is None else min(BATCH, limit - moved)
                    page = await self.conn.command("ZRANGE", shard.keys[state], 0, take - 1,
                                                   "WITHSCORES")
                    if not page:
                        break
                    await self.renew()
                    moved += await self._move_page(shard, new, target, state,
                                                   [(text(i), float(sc)) for i, sc in page], source)
                if limit is not None and moved >= limit:
                    return moved
        return moved

    async def _move_page(self, shard: AsyncQueue, new: list[AsyncQueue], target: ShardLayout,
                         state: str, page: list[tuple[str, float]], source: ShardLayout) -> int:
        """One page: every row read in one round trip, imported (pipelined), and only the
        rows whose import answered removed from the old shard (pipelined)."""
        reads: list[Any] = [("HGETALL", shard.job_key(i)) for i, _ in page]
        *flat, holders = await self._reads(shard, [*reads, ("HGETALL", shard.keys["inflight"])])
        held = {k: text(v) for k, v in _fields(holders).items()}
        imports, ids, unloads = [], [], []
        for (job_id, score), raw in zip(page, flat, strict=True):
            row = _fields(raw)
            if row:
                lane = text(row["lane"]) if "lane" in row else None
                was = source.index(job_id)
                if shard.name != source.names[was]:  # its reservation in the old layout goes too
                    unloads.append(unload_row(QueueKeys.of(source.names[was]), job_id, RESERVED))
                dest = new[target.index(job_id, lane)]
                imports.append(import_row(dest.k, job_id, state, score,
                                          lane is not None and held.get(lane) == job_id, row))
                home = new[target.index(job_id)]
                if home is not dest:  # one job per id in the new layout too (decision 0040)
                    imports.append(reserve(home.k, job_id, dest.name))
            ids.append(job_id)
        for reply in await self.conn.pipeline(imports) if imports else []:
            if isinstance(reply, BaseException):
                raise reply  # nothing of this page is removed before every import landed
        await self.conn.pipeline([unload_row(shard.k, i) for i in ids] + unloads)
        return len(ids)

    async def _reads(self, shard: AsyncQueue, reads: list[Any]) -> list[Any]:
        """Plain reads of one shard in one round trip: on a cluster, pipelined on the
        shard's node (the cluster client sends a flush's reads one by one); if that node
        does not answer them (a failover), through the cluster client."""
        if isinstance(self.conn, AsyncClusterConnector):
            try:
                node = self.conn.node(await self.conn.node_for_key(shard.keys["meta"]))
                return await node.flush([], reads)
            except EchoMQError:
                pass
        return await self.conn.flush([], reads)

    async def empty(self, layout: ShardLayout) -> bool:
        for shard in self.shards(layout):
            for state in (*_LIVE, *_DONE, "active"):
                if int(await self.conn.command("ZCARD", shard.keys[state])):
                    return False
        return True

    async def tidy(self, layout: ShardLayout) -> None:
        """A retired, empty layout keeps only its meta (the retired marker refuses clients).
        Its reservations left (a producer that died between its two steps, decision 0040;
        those of moved jobs went with them) are removed first."""
        for shard in self.shards(layout):
            left = [text(i) for i in await self.conn.command("ZRANGE", shard.keys["reserved"], 0, -1)]
            if left:
                await self.conn.pipeline([unload_row(shard.k, i, RESERVED) for i in left])
            for aux in _AUX:
                if aux != "wake":
                    await self.conn.command("DEL", shard.keys[aux])

    # --------------------------------------------------------------- drive
    async def drive(self, rec: Record, wait_s: float) -> Record:
        """Take ``rec`` through every phase left; the record at the end."""
        key = record_key(self.name)
        if rec.moving is not None:
            target = ShardLayout(self.name, *rec.moving)
            if not await self.prepare(rec, target, wait_s):
                raise QueueNotDrained(
                    f"queue {self.name!r}: jobs still active after {wait_s:g}s; the reshard to "
                    f"{target.count} shards was undone (claims resumed): try again")
            await self.retire(rec, target)
            await self.move(rec.layout, target, _LIVE, None)
            await self.conn.command("HSET", key, "count", target.count, "epoch", target.epoch,
                                    "from", f"{rec.count}:{rec.epoch}")
            await self.conn.command("HDEL", key, "moving", "paused_by_user")
            rec = await _must(self.conn, self.name)
        if rec.from_ is not None:
            old = ShardLayout(self.name, *rec.from_)
            await self.move(old, rec.layout, _LIVE, None)  # stragglers: none are expected
            await self.move(old, rec.layout, _DONE, None)
            if await self.empty(old):
                await self.tidy(old)
                await self.conn.command("HDEL", key, "from")
            rec = await _must(self.conn, self.name)
        return rec


def _fields(raw: Any) -> dict[str, Any]:
    """An HGETALL reply as a dict by field name: a dict (the cluster client's) or the
    flat field, value list (a plain pipelined read)."""
    if isinstance(raw, dict):
        return {text(k): v for k, v in raw.items()}
    return {text(raw[j]): raw[j + 1] for j in range(0, len(raw or []), 2)}


async def _must(conn: Conn, name: str) -> Record:
    rec = await read_record(conn, name)
    if rec is None:
        raise QueueNotFound(f"queue {name!r} is not a sharded queue (no {record_key(name)})")
    return rec


async def reshard(connector: Conn, name: str, *, to: int, wait_s: float = 60.0) -> int:
    """Switch queue ``name`` to ``to`` shards while it runs (see the module); returns the
    old count. QueueNotFound if it was never sharded; QueueNotDrained if another reshard
    is under way, or if its active jobs did not end within ``wait_s`` (nothing changed)."""
    ShardLayout(name, to)  # InvalidArgument before any I/O
    rec = await _must(connector, name)
    mover = _Mover(connector, name)
    if not await mover.take():
        raise QueueNotDrained(f"queue {name!r}: another reshard is under way")
    try:
        rec = await mover.drive(rec, wait_s)  # an interrupted one first
        if rec.count == to:
            return to
        fields = {text(k): text(v) for k, v in
                  (await connector.command("HGETALL", record_key(name))).items()}
        if fields.get("rate_max"):
            check_budget(int(fields["rate_max"]), to)
        old = rec.count
        target = ShardLayout(name, to, rec.epoch + 1)
        await connector.command("HSET", record_key(name), "moving", f"{to}:{target.epoch}")
        await mover.drive(await _must(connector, name), wait_s)
        return old
    finally:
        await mover.release()


async def repair(connector: Conn, name: str, *, wait_s: float = 60.0) -> bool:
    """Finish a reshard that its operator left (crashed, or stopped): one call of an
    upkeep beat, a no-op (False) unless the record says one is under way and no mover
    holds the token."""
    rec = await read_record(connector, name)
    if rec is None or (rec.moving is None and rec.from_ is None):
        return False
    mover = _Mover(connector, name)
    if not await mover.take():
        return False
    try:
        await mover.drive(rec, wait_s)
    except (QueueNotDrained, ShardCountMismatch):
        return False
    finally:
        await mover.release()
    return True
