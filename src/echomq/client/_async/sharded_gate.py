"""The claim gate of a sharded queue: pause, resume and rate limits for the logical queue
(docs/decisions/0031-sharded-gate.md; the shares are :mod:`echomq.protocol.shard_limits`).

* **Pause and resume** run each shard's own ``pause`` script, every shard. A shard that
  cannot be reached fails the call with its error after the others were done; the call
  is idempotent, so running it again finishes the job. The logical gate reads as paused
  while any shard is.
* **A rate limit** ``M/W`` is recorded in the queue's record (``emq:{q}:shards``: fields
  ``rate_max``, ``rate_ms``, ``lane_max``, ``lane_ms``) and kept as shares, one shard
  limit each (:func:`echomq.protocol.shard_limits.split`), enforced exactly by the shards'
  own gates. A lane lives in one shard, so a lane limit is every shard's as given.
* **Rebalancing** (:func:`rebalance`, one step per call, run by every
  :class:`~echomq.runtime.sharded_consumer.ShardedConsumer` each beat; one step at a time
  per queue under a ``SET NX PX`` token): a new plan is recorded (``plan``) and a wait key
  set (``emq:{q}:limit_wait``, ``PX`` = window + margin); the shares that shrink are
  lowered at once; the wait key is set again once they are; only when it has expired (on
  the home node's clock) does a later step lower again whatever is still above the plan
  (a crashed step) or else raise the shares that grow and drop the plan. So no window
  ever sees a shard's raised share together with another's share before its lowering.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from functools import partial
from typing import Any, Protocol

from echomq.client._async.cluster import AsyncClusterConnector
from echomq.client._async.connector import AsyncConnector
from echomq.client._async.queue import AsyncQueue
from echomq.client._fan import fan_out_async
from echomq.core.errors import InvalidArgument
from echomq.core.model import Stats
from echomq.protocol import keyspace
from echomq.protocol.decoders import text
from echomq.protocol.gate import Gate, RateLimit, check_lane_rate
from echomq.protocol.shard_limits import MARGIN_MS, check_budget, parse_plan, split, worth_moving
from echomq.protocol.sharding import record_key

__all__ = ["Logical", "gate", "pause", "rebalance", "resume", "set_limits", "shares"]


class Logical(Protocol):
    """What this module needs of :class:`echomq.client._async.sharded.AsyncShardedQueue`
    (which calls it: a protocol, so no import circle)."""

    name: str
    connector: AsyncConnector | AsyncClusterConnector

    @property
    def shards(self) -> Sequence[AsyncQueue]: ...
    async def _ready(self) -> None: ...
    async def stats_by_shard(self) -> list[Stats]: ...

# One rebalancing step at a time per queue: its token lives STEP_MS, three retry budgets
# (10 s each); a step writes a batch only while less than a third of it has passed on its
# own clock (started before the token was asked for, so the server's expiry comes later),
# so no write of a step that overran can land after another step began; a step in time
# releases the token at its end, so steps follow each other as fast as beats.
STEP_MS = 30_000
_FIELDS = ("rate_max", "rate_ms", "lane_max", "lane_ms")


def _wait_key(name: str) -> str:
    return keyspace.queue_key(name, "limit_wait")


def _step_key(name: str) -> str:
    return keyspace.queue_key(name, "limit_step")


async def pause(q: Logical) -> Gate:
    """Pause claims on every shard (admissions go on); the logical gate."""
    await q._ready()
    await fan_out_async([s.pause for s in q.shards])
    return await gate(q)


async def resume(q: Logical) -> Gate:
    """Resume claims on every shard (each wakes its parked consumers); the logical gate."""
    await q._ready()
    await fan_out_async([s.resume for s in q.shards])
    return await gate(q)


async def _record(q: Logical) -> dict[str, str]:
    raw: Any = await q.connector.command("HGETALL", record_key(q.name))
    return {text(k): text(v) for k, v in (raw or {}).items()}


def _limits(rec: dict[str, str]) -> tuple[RateLimit | None, RateLimit | None]:
    qmax, qms, lmax, lms = (int(rec.get(f, "0")) for f in _FIELDS)
    return (RateLimit(qmax, qms) if qmax else None), (RateLimit(lmax, lms) if lmax else None)


async def gate(q: Logical) -> Gate:
    """The logical gate: paused while any shard is; the limits the queue records."""
    await q._ready()
    gates: list[Gate] = await fan_out_async([s.gate for s in q.shards])
    rate, lane_rate = _limits(await _record(q))
    return Gate(paused=any(g.paused for g in gates), rate=rate, lane_rate=lane_rate)


async def shares(q: Logical) -> list[int | None]:
    """Each shard's share of the rate limit as its gate holds it (None: no limit)."""
    gates: list[Gate] = await fan_out_async([s.gate for s in q.shards])
    return [g.rate.max if g.rate else None for g in gates]


class _Overran(Exception):
    """A step ran past a third of its token's life: it writes nothing more."""


class _Step:
    def __init__(self, q: Logical) -> None:
        self.q, self.started = q, time.monotonic()

    async def take(self) -> bool:
        token = f"{os.getpid()}:{id(self)}"
        return await self.q.connector.command(
            "SET", _step_key(self.q.name), token, "NX", "PX", STEP_MS) is not None

    def check(self) -> None:
        if time.monotonic() - self.started > STEP_MS / 3000:
            raise _Overran

    async def release(self) -> None:
        self.check()  # still well inside the token's life: it is ours to delete
        await self.q.connector.command("DEL", _step_key(self.q.name))


async def set_limits(q: Logical, *, rate: RateLimit | None = None,
                     lane_rate: RateLimit | None = None) -> Gate:
    """Rate limits for the logical queue: at most ``rate.max`` leases of all its shards
    together in any ``rate.per_ms`` window (``rate.max`` >= the shard count), at most
    ``lane_rate.max`` per lane. None removes a limit. The shares start even (lowered at
    once, raised by a later :func:`rebalance` step when a shard's grows)."""
    for label, given in (("rate", rate), ("lane_rate", lane_rate)):
        if given is not None and not isinstance(given, RateLimit):
            raise InvalidArgument(f"{label} must be a RateLimit or None, not {type(given).__name__}")
    check_lane_rate(lane_rate)
    n = len(q.shards)
    if rate is not None:
        check_budget(rate.max, n)
    await q._ready()
    key = record_key(q.name)
    values: list[int] = []
    for limit in (rate, lane_rate):
        values += [limit.max, limit.per_ms] if limit else [0, 0]
    for field, value in zip(_FIELDS, values, strict=True):
        if value:
            await q.connector.command("HSET", key, field, value)
        else:
            await q.connector.command("HDEL", key, field)
    await q.connector.command("HDEL", key, "plan")
    if rate is None:
        await fan_out_async([partial(s.set_limits, lane_rate=lane_rate) for s in q.shards])
        return await gate(q)
    await _start_plan(_Step(q), split(rate.max, [0] * n), rate, lane_rate, await shares(q))
    return await gate(q)


async def _start_plan(step: _Step, plan: list[int], rate: RateLimit,
                      lane_rate: RateLimit | None, current: list[int | None]) -> None:
    """Record ``plan``, lower every share above it (or unset), then start the wait."""
    q, wait_ms = step.q, rate.per_ms + MARGIN_MS
    step.check()
    await q.connector.command("HSET", record_key(q.name), "plan", " ".join(map(str, plan)))
    await q.connector.command("SET", _wait_key(q.name), "1", "PX", wait_ms)
    await _lower(step, plan, rate, lane_rate, current)
    step.check()
    await q.connector.command("SET", _wait_key(q.name), "1", "PX", wait_ms)


async def _lower(step: _Step, plan: list[int], rate: RateLimit,
                 lane_rate: RateLimit | None, current: list[int | None]) -> int:
    """Set every shard whose share is above its plan (or unset) to its plan; how many."""
    todo = [i for i, (c, t) in enumerate(zip(current, plan, strict=True)) if c is None or c > t]
    step.check()
    await _set(step.q, todo, plan, rate, lane_rate)
    return len(todo)


async def _set(q: Logical, which: list[int], plan: list[int], rate: RateLimit,
               lane_rate: RateLimit | None) -> None:
    await fan_out_async([partial(q.shards[i].set_limits, rate=RateLimit(plan[i], rate.per_ms),
                                 lane_rate=lane_rate) for i in which])


async def rebalance(q: Logical) -> str | None:
    """One rebalancing step (see the module): ``"lowered"``, ``"raised"``, or None when
    there was nothing to do (no limit, another step running, a wait not over, shares that
    already fit the demand)."""
    rec = await _record(q)
    rate, lane_rate = _limits(rec)
    step = _Step(q)
    if rate is None or not await step.take():
        return None
    try:
        done = await _one_step(step, rec, rate, lane_rate)
    except _Overran:
        return None  # the token expires on its own; the next step starts over
    await step.release()
    return done


async def _one_step(step: _Step, rec: dict[str, str], rate: RateLimit,
                    lane_rate: RateLimit | None) -> str | None:
    q = step.q
    n = len(q.shards)
    current = await shares(q)
    plan = parse_plan(rec.get("plan", ""), n)
    if plan is not None:
        if await q.connector.command("EXISTS", _wait_key(q.name)):
            return None
        if await _lower(step, plan, rate, lane_rate, current):  # a step crashed mid-lowering
            step.check()
            await q.connector.command("SET", _wait_key(q.name), "1", "PX",
                                      rate.per_ms + MARGIN_MS)
            return "lowered"
        grow = [i for i, (c, t) in enumerate(zip(current, plan, strict=True))
                if c is not None and c < t]
        step.check()
        await _set(q, grow, plan, rate, lane_rate)
        await q.connector.command("HDEL", record_key(q.name), "plan")
        return "raised"
    if rate.max < n:  # recorded before the shard count changed: leave it to the operator
        return None
    target = split(rate.max, [s.pending for s in await q.stats_by_shard()])
    if not worth_moving(current, target):
        return None
    await _start_plan(step, target, rate, lane_rate, current)
    return "lowered"
