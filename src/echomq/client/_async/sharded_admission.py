"""The admission half of a sharded queue: each job to its shard, one job per id.

* ``enqueue`` and ``admit`` send the job to its shard (by lane, else by id; a
  ``dedupe_key`` routes by the key), after its typed error is checked; a laned job away
  from its id's home shard is reserved there first (:mod:`echomq.client._async.reservations`,
  decision 0040);
* ``enqueue_many`` and ``admit_many`` group the items by shard, pipeline each group (the
  groups run at once) and put every verdict back in input order; a shard that cannot be
  reached gives its items their typed error and the other shards' items keep theirs; a
  group refused by a retired shard (an online reshard) is sent again on the new layout.

:class:`AsyncShardedAdmission` is the base of
:class:`~echomq.client._async.sharded.AsyncShardedQueue` (claims, settles, upkeep, reads).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from typing import Any

from echomq import protocol as p
from echomq.client._async.queue import AsyncQueue
from echomq.client._async.reservations import (
    admit_one,
    recheck_many,
    release_many,
    reserve_many,
)
from echomq.client._async.sharded_base import AsyncShardedBase
from echomq.client._fan import fan_out_each_async
from echomq.core.errors import EchoMQError, InvalidArgument, ShardCountMismatch
from echomq.core.model import Verdict
from echomq.protocol.sharding import RETIRED, translate

__all__ = ["AsyncShardedAdmission"]


def _first(item: Any) -> object:
    try:
        return next(iter(item))
    except (TypeError, StopIteration):
        return None


class AsyncShardedAdmission(AsyncShardedBase):
    """Routing and admission of a sharded queue (see the module doc)."""

    # ----------------------------------------------------------------- layout
    def shard_for(self, job_id: str, lane: str | None = None) -> AsyncQueue:
        """The shard a job with this id (and lane) is admitted to."""
        return self.shards[self.layout.index(job_id, lane)]

    # -------------------------------------------------------------- admission
    async def enqueue(self, job_id: str, payload: bytes) -> Verdict:
        async def op() -> Verdict:
            if job_id in await self._in_old([job_id]):
                return Verdict.DUPLICATE
            return await admit_one(self, job_id, None, lambda s: s.enqueue(job_id, payload))
        return await self._following(op)

    async def admit(
        self, job_id: str, payload: bytes, *, lane: str | None = None, delay_ms: int = 0,
        serial: bool = False, max_attempts: int | None = None, priority: int = 0,
        timeout_ms: int | None = None, dedupe_ms: int | None = None,
        dedupe_key: str | None = None, dedupe_mode: str | None = None,
        expires_ms: int | None = None,
    ) -> Verdict:
        """Admit one job in its shard (:meth:`AsyncQueue.admit`). With a ``dedupe_key`` the
        job goes to the key's shard (a debounced job's lane ``dd:<key>`` is in it too);
        without one the window is on the id, in the id's shard (or its lane's), as
        :meth:`admit_many` routes it. A ``dedupe_key`` with a lane of the caller's is
        refused (InvalidArgument): the lane would choose the shard and the window would
        hold in that shard only."""
        window = p.check_window(dedupe_ms, dedupe_key, dedupe_mode)
        route = lane  # the shard's key: the lane, else the id (layout.index)
        if window is not None and window.key is not None:
            if lane is not None:
                raise InvalidArgument(f"sharded queue {self.name!r}: a dedupe_key with a lane "
                                      "would dedupe in the lane's shard only; drop one")
            route = window.key

        async def op() -> Verdict:
            if job_id in await self._in_old([job_id]):
                return Verdict.DUPLICATE
            # Its typed error before the reservation (decision 0040) writes anything:
            self.shard_for(job_id, route).admission.call(
                job_id, payload, lane, delay_ms, serial, max_attempts, priority, timeout_ms,
                window, expires_ms=expires_ms)
            return await admit_one(self, job_id, route, lambda s: s.admit(
                job_id, payload, lane=lane, delay_ms=delay_ms, serial=serial,
                max_attempts=max_attempts, priority=priority, timeout_ms=timeout_ms,
                dedupe_ms=dedupe_ms, dedupe_key=dedupe_key, dedupe_mode=dedupe_mode,
                expires_ms=expires_ms))
        return await self._following(op)

    def _group(self, items: list[Any], width: int, out: list[Verdict | EchoMQError],
               todo: Iterable[int]) -> list[tuple[int, list[int]]]:
        groups: dict[int, list[int]] = {}
        for i in todo:
            item = items[i]
            try:
                fields = tuple(item)
            except TypeError:
                fields = ()
            if len(fields) != width:
                shape = "(id, payload, lane) triple" if width == 3 else "(id, payload) pair"
                out[i] = InvalidArgument(f"item {i}: expected an {shape}")
                continue
            try:
                shard = self.layout.index(fields[0], fields[2] if width == 3 else None)
            except InvalidArgument:
                shard = 0  # a malformed id or lane: its shard gives the typed error, as alone
            groups.setdefault(shard, []).append(i)
        return sorted(groups.items())

    async def _admit_grouped(self, items: list[Any], width: int, serial: bool,
                             kw: dict[str, Any] | None = None) -> list[Verdict | EchoMQError]:
        """``kw``: the dedupe window of every item (``dedupe_ms``, ``dedupe_mode``), if any."""
        kw = kw or {}
        window = p.check_window(kw.get("dedupe_ms"), None, kw.get("dedupe_mode"))
        await self._ready()
        out: list[Verdict | EchoMQError] = [Verdict.DUPLICATE] * len(items)
        todo = list(range(len(items)))
        made: dict[int, Any] = {}  # the reservations this call made (decision 0040)
        while todo:
            ids = [_first(items[i]) for i in todo]
            known = await self._in_old([i for i in ids if isinstance(i, str)])
            todo = [i for i, job in zip(todo, ids, strict=True) if job not in known]
            todo, retired = await reserve_many(self, items, todo, partial(
                self._check, items, serial, window=window), out, made)  # one job per id (decision 0040)
            if retired is not None:
                await self._follow(retired)
                continue
            groups = self._group(items, width, out, todo)
            sends = [partial(self.shards[s].enqueue_many, [items[i] for i in where])
                     if width == 2 else
                     partial(self.shards[s].admit_many, [items[i] for i in where], serial=serial,
                             **kw)
                     for s, where in groups]
            replies = await fan_out_each_async(sends)
            todo, retired = [], None
            for (_, where), got in zip(groups, replies, strict=True):
                for n, i in enumerate(where):
                    verdict = got if isinstance(got, EchoMQError) else got[n]
                    if isinstance(verdict, EchoMQError):
                        verdict = translate(verdict, self.name)
                        if isinstance(verdict, ShardCountMismatch) and RETIRED in str(verdict):
                            todo.append(i)  # refused by a retired shard: nothing written
                            retired = verdict
                    out[i] = verdict
            if retired is not None:
                await self._follow(retired)
        await release_many(self, items, out, made)
        await recheck_many(self, items, out, lambda shard, item: self._send_one(
            shard, item, width, serial, kw))
        return out

    def _check(self, items: list[Any], serial: bool, i: int, *,
               window: p.Window | None = None) -> None:
        """The typed error item ``i`` would get from its shard's admission, if any."""
        job_id, payload, lane = items[i]
        self.shard_for(job_id, lane).admission.call(job_id, payload, lane, 0, serial, None, 0,
                                                    None, window)

    async def _send_one(self, shard: AsyncQueue, item: Any, width: int, serial: bool,
                        kw: dict[str, Any]) -> Verdict | EchoMQError:
        got = await (shard.enqueue_many([item]) if width == 2 else
                     shard.admit_many([item], serial=serial, **kw))
        return got[0]

    async def enqueue_many(
        self, pairs: Iterable[tuple[str, bytes]]
    ) -> list[Verdict | EchoMQError]:
        """One verdict per ``(id, payload)`` item, in input order (see the module doc)."""
        return await self._admit_grouped(list(pairs), 2, False)

    async def admit_many(
        self, items: Iterable[tuple[str, bytes, str | None]], *, serial: bool = False,
        dedupe_ms: int | None = None, dedupe_mode: str | None = None,
        expires_ms: int | None = None,
    ) -> list[Verdict | EchoMQError]:
        """One verdict per ``(id, payload, lane)`` item, in input order. ``dedupe_ms`` and
        ``dedupe_mode`` give each item a window on its own id (:meth:`AsyncQueue.admit_many`);
        ``expires_ms`` a deadline to start by, as in :meth:`admit`."""
        window = p.check_window(dedupe_ms, None, dedupe_mode)  # InvalidArgument before any I/O
        p.check_expiry(expires_ms, 0)
        kw: dict[str, Any] = {"dedupe_ms": dedupe_ms, "dedupe_mode": dedupe_mode} if window else {}
        if expires_ms is not None:
            kw["expires_ms"] = expires_ms
        return await self._admit_grouped(list(items), 3, serial, kw)
