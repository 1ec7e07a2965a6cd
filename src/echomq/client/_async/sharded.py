"""One logical queue spread over N shards, each an ordinary queue with its own hash tag.

Every call is one or more calls of the shards' own :class:`AsyncQueue`, so every
transition stays one script in one slot with its guarantees; this module only routes
and merges (echomq.protocol.sharding has the layout, docs/decisions/0020-sharded-queues.md why):

* admission goes to the job's shard (by lane, else by id), one job per id whatever its
  lane; the batches are grouped by shard, verdicts kept in input order
  (:mod:`echomq.client._async.sharded_admission`, the base class);
* ``claim`` visits the shards in turn from a start that moves by one each call, so no
  shard starves; a lease names its shard, so heartbeat, complete, retry and defer go
  straight to it;
* stats, counts, upkeep and the dead-job operations cover every shard: counts are
  sums, pages walk the shards in index order, limits are spent across them in order.

The shard count is checked against the queue's record before the first call
(:meth:`open`); a client with another count gets :class:`ShardCountMismatch`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from functools import partial
from typing import Any, TypeVar

from echomq import protocol as p
from echomq.client._async.cluster import AsyncClusterConnector
from echomq.client._async.connector import AsyncConnector
from echomq.client._async.queue import AsyncQueue
from echomq.client._async.sharded_admission import AsyncShardedAdmission
from echomq.client._fan import fan_out_async
from echomq.core.errors import (
    EchoMQError,
    InvalidArgument,
    JobNotFound,
    ProtocolVersionError,
    ResultTimeout,
)
from echomq.core.model import (
    CancelOutcome,
    Completion,
    JobView,
    Lease,
    ProgressOutcome,
    QueueOptions,
    RetryOutcome,
    Stats,
)
from echomq.protocol import STATES, Bulk
from echomq.protocol.decoders import text
from echomq.protocol.gate import Gate, RateLimit
from echomq.protocol.reservations import RESERVED, WINDOW_MS
from echomq.protocol.sharding import (
    RETIRED,
    refusals,
)

T = TypeVar("T")
RESULT_SLICE_S = 1.0  # a result waiter looks for its job's shard again this often


__all__ = ["AsyncShardedQueue"]


def _a_job(row: dict[str, Any] | None) -> bool:
    """A job's row (not None, not a reservation: decision 0040)."""
    return row is not None and text(row.get("state", b"")) != RESERVED


def _int(value: object) -> int:
    return int(value.decode() if isinstance(value, bytes) else str(value))


class AsyncShardedQueue(AsyncShardedAdmission):
    """Queue ``name`` spread over ``shards`` sub-queues; the API of :class:`AsyncQueue`.
    The layout and how it follows a reshard: :class:`AsyncShardedBase`."""

    def __init__(
        self, connector: AsyncConnector | AsyncClusterConnector, name: str, *, shards: int,
        options: QueueOptions | None = None, reserve_window_ms: int = WINDOW_MS,
    ) -> None:
        super().__init__(connector, name, shards=shards, options=options,
                         reserve_window_ms=reserve_window_ms)
        self._turn = 0

    async def fence(self) -> str:
        """Check the shard count and every shard's protocol version; the version."""
        await self._ready()
        with refusals(self.name):
            versions = await fan_out_async([s.fence for s in self.shards])
        return versions[0]

    # ------------------------------------------------------------ claim plane
    async def claim(self, count: int = 1, *, lease_ms: int,
                    window: int | None = None) -> list[Lease]:
        """Lease up to ``count`` jobs: the shards in turn, from a start that moves by one
        each call (so no shard starves), each asked for what is still missing. A shard
        that fails after others gave leases is skipped this time (those leases are
        returned); if none gave any, its error is raised."""
        return await self._following(partial(self._claim, count, lease_ms, window))

    async def _claim(self, count: int, lease_ms: int, window: int | None) -> list[Lease]:
        n = len(self.shards)
        start, self._turn = self._turn % n, self._turn + 1
        out: list[Lease] = []
        for j in range(n):
            if len(out) >= count:
                break
            shard = self.shards[(start + j) % n]
            try:
                with refusals(self.name):
                    out += await shard.claim(count - len(out), lease_ms=lease_ms,
                                             window=window)
            except EchoMQError:
                if not out:
                    raise
        return out

    async def heartbeat(self, lease: Lease, *, lease_ms: int) -> p.Deadline | None:
        return await self._on_lease(lease, lambda s: s.heartbeat(lease, lease_ms=lease_ms), None)

    async def heartbeat_many(self, leases: Sequence[Lease], *,
                             lease_ms: int) -> list[p.Deadline | None]:
        return await self._per_shard(leases, lambda s, w: s.heartbeat_many(
            [leases[i] for i in w], lease_ms=lease_ms), None)

    async def complete(self, lease: Lease, result: bytes = b"") -> Completion:
        return await self._on_lease(lease, lambda s: s.complete(lease, result), Completion.STALE)

    async def complete_many(
        self, leases: Sequence[Lease], results: Sequence[bytes] | None = None
    ) -> list[Completion]:
        res = list(results) if results is not None else [b""] * len(leases)
        if len(res) != len(leases):
            raise InvalidArgument(f"{len(leases)} leases but {len(res)} results")
        return await self._per_shard(leases, lambda s, w: s.complete_many(
            [leases[i] for i in w], [res[i] for i in w]), Completion.STALE)

    async def retry(self, lease: Lease, *, delay_ms: int, error: str = "",
                    give_up: bool = False) -> RetryOutcome:
        return await self._on_lease(lease, lambda s: s.retry(lease, delay_ms=delay_ms, error=error,
                                                             give_up=give_up),
                                    RetryOutcome.STALE)

    async def defer(self, lease: Lease, *, delay_ms: int) -> RetryOutcome:
        return await self._on_lease(lease, lambda s: s.defer(lease, delay_ms=delay_ms),
                                    RetryOutcome.STALE)

    async def _each(self, call: str, *args: object) -> list[Any]:
        return await self._following(lambda: fan_out_async(
            [partial(getattr(q, call), *args) for q in self.shards]))

    async def job(self, job_id: str) -> dict[str, bytes] | None:
        """The row of one job (asked of every shard: its lane, which chose it, is unknown)."""
        self.shards[0].job_key(job_id)  # InvalidJobId before any I/O
        rows: list[dict[str, bytes] | None] = await self._each("job", job_id)
        found = next((r for r in rows if _a_job(r)), None)
        for shard in self.old if found is None else []:  # still in a retired layout
            raw = await self.connector.command("HGETALL", shard.job_key(job_id))
            row: dict[str, bytes] = {text(k): v for k, v in (raw or {}).items()}
            if _a_job(row) and row:
                return row
        return found

    # ------------------------------------------------------------------ upkeep
    async def promote(self) -> int:
        return sum(await self._each("promote"))

    async def reap(self) -> tuple[int, int]:
        got = await self._each("reap")
        return p.Reaped(sum(r[0] for r in got), sum(r[1] for r in got),
                        sum(getattr(r, "cancelled", 0) for r in got))

    async def trim(self) -> int:
        return sum(await self._each("trim"))

    async def expire(self) -> tuple[int, int]:
        """Every shard's expiry reaper, one bounded step each: (expired, dropped)."""
        got = await self._each("expire")
        return sum(r[0] for r in got), sum(r[1] for r in got)

    async def _spend(self, call: str, limit: int) -> Bulk:
        """A bulk dead-job call with ``limit`` spent across the shards in index order."""
        await self._ready()
        acted = remaining = 0
        for shard in self.shards:
            with refusals(self.name):
                got: Bulk = await getattr(shard, call)(limit=limit - acted)
            acted += int(got)
            remaining += got.remaining
        return Bulk(acted, remaining)

    async def purge_dead(self, *, limit: int = 1000) -> Bulk:
        return await self._spend("purge_dead", limit)

    async def requeue_dead(self, *, limit: int = 1000) -> Bulk:
        return await self._spend("requeue_dead", limit)

    async def requeue(self, ids: Sequence[str]) -> int:
        got: list[Bulk] = await self._each("requeue", ids)
        return Bulk(sum(int(b) for b in got), sum(b.remaining for b in got))

    async def purge(self, state: str, ids: Sequence[str]) -> int:
        return sum(int(n) for n in await self._each("purge", state, ids))

    async def _holder(self, job_id: str) -> AsyncQueue:
        """The shard whose keyspace holds ``job_id``'s row; JobNotFound if none does."""
        self.shards[0].job_key(job_id)
        rows: list[dict[str, bytes] | None] = await self._each("job", job_id)
        for shard, row in zip(self.shards, rows, strict=True):
            if _a_job(row):
                return shard
        raise JobNotFound(f"no job {job_id}: never admitted, or its row is gone", job_id=job_id)

    async def result(self, job_id: str, *, timeout: float | None = 30.0) -> bytes:  # noqa: ASYNC109, RUF100
        """As :meth:`AsyncQueue.result`, on the shard holding the job. Waits in slices of
        :data:`RESULT_SLICE_S`, looking for the job's shard again after each, so a job
        an online reshard moves meanwhile is followed to its new shard."""
        self.shards[0].job_key(job_id)
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if end is None else max(0.0, end - time.monotonic())
            try:
                holder = await self._holder(job_id)
            except JobNotFound:
                await self.open()  # a reshard may be moving it: look at the record again
                if left == 0 or not (self.old or (await self._record()).moving):
                    raise
                await asyncio.sleep(0.05)
                continue
            part = RESULT_SLICE_S if left is None else min(left, RESULT_SLICE_S)
            try:
                return await holder.result(job_id, timeout=part)
            except ResultTimeout:
                if left is not None and left <= part:
                    raise
            except ProtocolVersionError as exc:
                if RETIRED not in str(exc):
                    raise
                await self.open()

    async def progress(self, job_id: str) -> bytes | None:
        return await (await self._holder(job_id)).progress(job_id)

    async def report_progress(self, lease: Lease, report: bytes) -> ProgressOutcome:
        return await self._on_lease(lease, lambda s: s.report_progress(lease, report),
                                    ProgressOutcome.STALE)

    async def cancel(self, ids: Sequence[str]) -> list[CancelOutcome]:
        """One outcome per id: the shard holding the job answers; the others leave it."""
        per_shard: list[list[CancelOutcome]] = await self._each("cancel", ids)
        return [next((o for o in got if o is not CancelOutcome.LEFT), CancelOutcome.LEFT)
                for got in zip(*per_shard, strict=True)]

    # ------------------------------------------------- claim gate (sharded_gate)
    async def pause(self) -> Gate:
        """Stop claims on every shard; admissions go on. Returns the logical gate."""
        from echomq.client._async import sharded_gate
        return await sharded_gate.pause(self)

    async def resume(self) -> Gate:
        """Let claims go on again on every shard. Returns the logical gate."""
        from echomq.client._async import sharded_gate
        return await sharded_gate.resume(self)

    async def gate(self) -> Gate:
        """The logical gate: paused while any shard is; the queue's recorded limits."""
        from echomq.client._async import sharded_gate
        return await sharded_gate.gate(self)

    async def set_limits(self, *, rate: RateLimit | None = None,
                         lane_rate: RateLimit | None = None) -> Gate:
        """Rate limits that hold for the logical queue: ``rate`` split in shares that follow
        the demand, never more than ``rate.max`` leases in all in any window
        (docs/decisions/0031-sharded-gate.md); ``lane_rate`` per lane."""
        from echomq.client._async import sharded_gate
        return await sharded_gate.set_limits(self, rate=rate, lane_rate=lane_rate)

    # -------------------------------------------------------------- inspection
    async def pending_size(self) -> int:
        return sum(await self._each("pending_size"))

    async def stats(self) -> Stats:
        got: list[Stats] = await self._each("stats")
        return Stats(**{s: sum(getattr(x, s) for x in got) for s in STATES})

    async def browse(self, state: str, *, offset: int = 0, limit: int = 50) -> list[JobView]:
        """A page of the logical queue: the shards in index order, each in set order."""
        self.shards[0].k.state(state)
        p.check_int("offset", offset, 0, p.MAX_OFFSET)
        p.check_int("limit", limit, 0, p.MAX_PAGE)
        sizes = [getattr(s, state) for s in await self.stats_by_shard()]
        out: list[JobView] = []
        skip = offset
        for shard, size in zip(self.shards, sizes, strict=True):
            if skip >= size:
                skip -= size
                continue
            if len(out) >= limit:
                break
            with refusals(self.name):
                out += await shard.browse(state, offset=skip, limit=limit - len(out))
            skip = 0
        return out

    async def stats_by_shard(self) -> list[Stats]:
        """Each shard's counts, in shard order."""
        return await self._each("stats")
