"""A scheduler: runs :class:`~echomq.protocol.schedules.Schedule` objects, any number at once.

Run one or many (in one process or many, on one server or a cluster): every tick of
every schedule is admitted exactly once, by whichever scheduler's ``schedule`` call
gets there first; the others' calls admit nothing for it (docs/features.md,
tests/echomq/test_schedule_procs.py). The server's clock decides what is due: a
scheduler only estimates it (its clock plus the offset the last reply showed) to know
when to ask, and a tick it asks for too early is simply not admitted yet.

A schedule may target a sharded queue (decision 0020): the scheduler reads the queue's
shard count (again every :data:`_RESOLVE_S`, and at once when a shard refuses for a
reshard) and runs the schedule pinned to one shard (:meth:`Schedule.on_shards`), whose
slot keeps its mark: each tick is still admitted once, onto the logical queue. After a
reshard the pinned shard may change: the schedule is then seen for the first time there
(its mark starts at the newest tick the server's clock has passed, so no tick admitted
before is admitted again; ticks due during the switch may be skipped).

A server's refusal (back-pressure, a failover, a lost connection) is logged once per
episode and ridden out with a growing back-off; a configuration error (credentials,
the version fence) ends :meth:`run` with its typed error.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence

from echomq.client._async.cluster import AsyncClusterConnector
from echomq.client._async.connector import AsyncConnector
from echomq.client.replies import Episodes, classify
from echomq.core.errors import InvalidArgument, ProtocolVersionError, ShardCountMismatch
from echomq.protocol import Call
from echomq.protocol.resharding import parse_record
from echomq.protocol.schedules import Schedule, decode_schedule, tick_of
from echomq.protocol.sharding import RETIRED, record_key

__all__ = ["AsyncScheduler", "Fired"]

log = logging.getLogger("echomq.scheduler")

Fired = tuple[Schedule, int, str]
"""One admission by this scheduler: the schedule, the tick (server ms), the job id."""

_MAX_SLEEP_S = 0.5  # re-read the marks at least this often, and see stop() soon
_EARLY_S = 0.005  # a due tick the server did not admit yet (its clock is behind ours)
_RESOLVE_S = 10.0  # how often a schedule's queue is looked up again (sharded or plain)


class AsyncScheduler:
    """Admit the due ticks of ``schedules`` until :meth:`stop` (``run``), or once (``tick``)."""

    def __init__(self, connector: AsyncConnector | AsyncClusterConnector,
                 schedules: Sequence[Schedule], *, name: str = "scheduler") -> None:
        schedules = list(schedules)
        if not schedules:
            raise InvalidArgument("a scheduler needs at least one schedule")
        seen: set[tuple[str, str]] = set()
        for s in schedules:
            if not isinstance(s, Schedule):
                raise InvalidArgument(f"expected a Schedule, not {type(s).__name__}")
            if not s.queue:
                raise InvalidArgument(f"schedule {s.name!r} names no queue (a typed task's "
                                      "schedule is given to app.task(schedule=...))")
            if (s.queue, s.name) in seen:
                raise InvalidArgument(f"schedule {s.name!r} given twice for queue {s.queue!r}")
            seen.add((s.queue, s.name))
        self.connector = connector
        self.schedules = schedules
        self.name = name
        self.marks: dict[tuple[str, str], int] = {}  # the last mark each schedule's reply showed
        self.admitted = 0  # ticks this scheduler admitted
        self._offset_ms = 0.0  # the server's clock minus ours, from the last reply
        self._stopped = False
        self._episodes = Episodes(name, log)
        # The schedule to run for each one (itself, or pinned to a shard), and when seen.
        self._targets: dict[tuple[str, str], tuple[Schedule, float]] = {}

    def stop(self) -> None:
        """End :meth:`run` after its current pass."""
        self._stopped = True

    def _now_ms(self) -> int:
        return int(time.time() * 1000 + self._offset_ms)

    async def tick(self) -> list[Fired]:
        """One pass: for each schedule, ask the server to admit its due ticks."""
        fired: list[Fired] = []
        for s in self.schedules:
            key = (s.queue, s.name)
            target = await self._target(s)
            if key not in self.marks:  # first sight: the server keeps its mark, or starts one
                now = await self.connector.server_time_ms() if not self.marks else self._now_ms()
                await self._call(s, target.call([], floor=s.latest(now)))
            due = s.due(self.marks.get(key), self._now_ms())
            if due:
                fired += [(s, tick_of(x), x) for x in await self._call(s, target.call(due))]
        self.admitted += len(fired)
        return fired

    async def _target(self, s: Schedule) -> Schedule:
        """``s`` itself on a plain queue, pinned to its shard on a sharded one."""
        key = (s.queue, s.name)
        known = self._targets.get(key)
        if known is not None and time.monotonic() - known[1] < _RESOLVE_S:
            return known[0]
        rec = parse_record(s.queue, await self.connector.command("HGETALL", record_key(s.queue)))
        target = s if rec is None else s.on_shards(rec.count, rec.epoch)
        if known is not None and known[0].queue != target.queue:
            self.marks.pop(key, None)  # another shard keeps this schedule's mark now
        self._targets[key] = (target, time.monotonic())
        return target

    async def _call(self, s: Schedule, call: Call) -> list[str]:
        sent = time.time() * 1000
        try:
            reply = decode_schedule(await self.connector.run(call))
        except ProtocolVersionError as exc:
            if RETIRED not in str(exc):
                raise
            self._targets.clear()  # resharded: look the layout up again, then retry
            raise ShardCountMismatch(f"queue {s.queue!r} was resharded: {exc}") from exc
        self._offset_ms = reply.now_ms - (sent + time.time() * 1000) / 2
        if reply.mark >= 0:
            self.marks[(s.queue, s.name)] = reply.mark
        return reply.admitted

    def _sleep_s(self) -> float:
        """Until the next tick any schedule waits for (its next after the known mark)."""
        now = self._now_ms()
        wake = min((s.next_after(self.marks[(s.queue, s.name)]) if (s.queue, s.name) in self.marks
                    else now) for s in self.schedules)
        if wake <= now:
            return _EARLY_S
        return min((wake - now) / 1000 + 0.001, _MAX_SLEEP_S)

    async def run(self, *, on_admit: Callable[[Fired], None] | None = None) -> None:
        """Admit due ticks until :meth:`stop`; a configuration error ends it (raised).
        ``on_admit`` is called with each admission this scheduler made."""
        while not self._stopped:
            try:
                for fired in await self.tick():
                    if on_admit is not None:
                        on_admit(fired)
                self._episodes.answered()
            except ShardCountMismatch:  # a shard retired by a reshard: look the layout up again
                await sleep_unless(self, 0.05)
                continue
            except Exception as exc:
                refusal = classify(exc)
                if not refusal.kind.retry:
                    raise
                await sleep_unless(self, self._episodes.refused(refusal, "a schedule call"))
                continue
            await sleep_unless(self, self._sleep_s())


async def sleep_unless(scheduler: AsyncScheduler, seconds: float) -> None:
    """Sleep ``seconds`` in slices, returning early once the scheduler is stopped."""
    end = time.monotonic() + seconds
    while not scheduler._stopped:
        left = end - time.monotonic()
        if left <= 0:
            return
        await asyncio.sleep(min(left, 0.05))
