"""Periodic jobs: a :class:`Schedule` admits exactly one job per tick. Pure (no I/O).

A schedule names its ticks by a cron expression (``croniter``, the ``cron`` extra; five
fields, or six with seconds last; UTC) or a fixed interval (``every_ms``, ticks at
``offset_ms + k * every_ms`` of the Unix epoch, server clock). Any number of schedulers
may run the same schedule (:class:`echomq.AsyncScheduler`, ``echomq schedule``, or
``WorkerSettings(schedules=...)``); each tick still becomes one job, because

* the job's id derives from the schedule's name and the tick (:meth:`Schedule.job_id`:
  ``derive_id("JOB", str(tick), namespace="schedule:" + name, at_ms=tick)``), and
* the ``schedule`` script (``lua/schedule.lua``) admits a tick only if it is later than
  the schedule's *mark* (the last tick admitted, kept in ``emq:{q}:sched:<name>``) and
  not later than the server's ``TIME``, and moves the mark in the same step. So a
  tick is never admitted twice, even after its job's row has been trimmed, and the
  schedulers' clocks only decide when to ask, never what is due.

Missed ticks (the schedulers were all down, or late): :attr:`Missed.SKIP` admits only
the newest due tick (one late run, the older ticks dropped); :attr:`Missed.CATCH_UP`
admits every missed tick, oldest first, but at most ``max_catch_up`` (the newest ones).
A schedule seen for the first time starts at its next tick (nothing from the past).
A handler learns its tick from the job id: :func:`tick_of`.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from echomq.core import ids
from echomq.core.bounds import MAX_ATTEMPTS, MAX_DELAY_MS, check_int
from echomq.core.errors import InvalidArgument
from echomq.protocol import Call, QueueKeys, check_lane, check_payload, keyspace, layout
from echomq.protocol.gate import check_priority

__all__ = ["MAX_CATCH_UP", "MIN_EVERY_MS", "Missed", "Schedule", "ScheduleReply", "tick_of"]

MIN_EVERY_MS = 10  # below this a scheduler's own round trip is the tick
MAX_CATCH_UP = 10_000  # ticks one call may admit after a gap (one script call stays short)
_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,100}")
_MAX_PAYLOAD = 512 * 1024 * 1024


class Missed(enum.Enum):
    """What a schedule does with ticks that passed while no scheduler admitted them."""

    SKIP = "skip"  # admit the newest due tick only
    CATCH_UP = "catch_up"  # admit each missed tick, oldest first, at most max_catch_up


@dataclass(frozen=True, slots=True)
class ScheduleReply:
    """One ``schedule`` call's answer: the mark after it (-1: none yet), the server's now,
    and the ids this call admitted (a tick another scheduler admitted is not among them)."""

    mark: int
    now_ms: int
    admitted: list[str]


@dataclass(frozen=True, slots=True, kw_only=True)
class Schedule:
    """A named periodic job on ``queue``: give ``every_ms`` or ``cron``, not both.

    Bad values raise :class:`~echomq.core.errors.InvalidArgument` here, before anything is sent.
    Without a ``queue`` (and then perhaps without a ``name``) it is a typed task's
    schedule (``app.task(schedule=Schedule(cron=...))``): the app fills in the task's
    queue, name and payload; a scheduler refuses it as it is.
    """

    name: str = ""
    queue: str = ""
    every_ms: int | None = None
    cron: str | None = None
    offset_ms: int = 0
    payload: bytes = b""
    lane: str | None = None
    max_attempts: int | None = None
    timeout_ms: int | None = None
    priority: int = 0
    missed: Missed = Missed.SKIP
    max_catch_up: int = 100

    def __post_init__(self) -> None:
        if not (self.name == "" and self.queue == "") and (
                not isinstance(self.name, str) or not _NAME.fullmatch(self.name)):
            raise InvalidArgument(f"a schedule name is 1..100 of [A-Za-z0-9_.-], not {self.name!r}")
        if self.queue != "":
            keyspace.check_queue(self.queue)
        if (self.every_ms is None) == (self.cron is None):
            raise InvalidArgument(f"schedule {self.name!r}: give every_ms or cron (exactly one)")
        if self.every_ms is not None:
            check_int("every_ms", self.every_ms, MIN_EVERY_MS, MAX_DELAY_MS)
            check_int("offset_ms", self.offset_ms, 0, self.every_ms - 1)
        else:
            if self.offset_ms:
                raise InvalidArgument("offset_ms is for every_ms; a cron expression sets its own times")
            _cron(self.cron, 0)  # parses it now
        object.__setattr__(self, "payload", check_payload(self.payload, _MAX_PAYLOAD))
        check_lane(self.lane)
        if self.max_attempts is not None:
            check_int("max_attempts", self.max_attempts, 1, MAX_ATTEMPTS)
        if self.timeout_ms is not None:
            check_int("timeout_ms", self.timeout_ms, 1, MAX_DELAY_MS)
        check_priority(self.priority)
        if isinstance(self.missed, str) and not isinstance(self.missed, Missed):
            try:
                object.__setattr__(self, "missed", Missed(self.missed))
            except ValueError:
                raise InvalidArgument(f"missed must be 'skip' or 'catch_up', not {self.missed!r}") from None
        if not isinstance(self.missed, Missed):
            raise InvalidArgument(f"missed must be a Missed, not {self.missed!r}")
        check_int("max_catch_up", self.max_catch_up, 1, MAX_CATCH_UP)

    # ------------------------------------------------------------ ticks
    @property
    def spec(self) -> str:
        """How the schedule names its ticks (kept with its mark for inspection)."""
        if self.every_ms is not None:
            return f"every {self.every_ms} ms +{self.offset_ms}, missed={self.missed.value}"
        return f"cron {self.cron} UTC, missed={self.missed.value}"

    def latest(self, now_ms: int) -> int:
        """The newest tick at or before ``now_ms``."""
        if self.every_ms is not None:
            return now_ms - (now_ms - self.offset_ms) % self.every_ms
        # croniter counts in whole seconds: the newest tick before the next whole second.
        return int(_cron(self.cron, now_ms // 1000 + 1).get_prev(float) * 1000)

    def next_after(self, tick_ms: int) -> int:
        """The first tick strictly after ``tick_ms``."""
        if self.every_ms is not None:
            return self.latest(tick_ms) + self.every_ms
        return int(_cron(self.cron, tick_ms // 1000).get_next(float) * 1000)

    def ticks(self, after_ms: int, upto_ms: int, limit: int) -> list[int]:
        """The newest ``limit`` ticks in ``(after_ms, upto_ms]``, oldest first."""
        out: list[int] = []
        tick = self.latest(upto_ms)
        if self.every_ms is not None:
            while tick > after_ms and len(out) < limit:
                out.append(tick)
                tick -= self.every_ms
        else:
            it = _cron(self.cron, tick // 1000 + 1)
            while len(out) < limit:
                tick = int(it.get_prev(float) * 1000)
                if tick <= after_ms:
                    break
                out.append(tick)
        return out[::-1]

    def due(self, mark: int | None, now_ms: int) -> list[int]:
        """The ticks to ask the server to admit, by the missed-tick policy."""
        if mark is None:
            return []  # first sight: the floor call sets the mark, the next tick runs
        if self.missed is Missed.SKIP:
            return self.ticks(mark, now_ms, 1)
        return self.ticks(mark, now_ms, self.max_catch_up)

    def job_id(self, tick_ms: int) -> str:
        """The id of this schedule's job for ``tick_ms`` (the same in every scheduler)."""
        return ids.derive_id("JOB", str(tick_ms), namespace=f"schedule:{self.name}", at_ms=tick_ms)

    def on_shards(self, count: int, epoch: int = 0) -> Schedule:
        """This schedule pinned to one shard of its queue sharded in ``count``: the shard of
        its lane, else the shard of ``schedule:<name>``. The ``schedule`` script then runs
        in that shard's slot, where its mark lives: each tick still admitted once (the job's
        id does not change; decision 0020)."""
        from echomq.protocol.sharding import ShardLayout

        layout = ShardLayout(self.queue, count, epoch)
        i = layout.index(f"schedule:{self.name}", self.lane)
        return dataclasses.replace(self, queue=layout.names[i])

    # ------------------------------------------------------------ the script call
    def call(self, ticks: Sequence[int], *, floor: int | None = None) -> Call:
        """The ``schedule`` call admitting ``ticks`` (ascending; none: read / set the floor)."""
        k = QueueKeys.of(self.queue)
        job_ids = [self.job_id(t) for t in ticks]
        keys = [keyspace.queue_key(self.queue, "sched:" + self.name), k.pending, k.lanes, k.meta,
                k.wake, *(k.job(i) for i in job_ids)]
        args: list[str | bytes | int] = [
            self.name, "" if floor is None else floor, self.payload, self.lane or "",
            "" if self.max_attempts is None else self.max_attempts, self.spec,
            "" if self.timeout_ms is None else self.timeout_ms, self.priority, *job_ids]
        return Call(_SCHEDULE, keys, args)


def decode_schedule(reply: Any) -> ScheduleReply:
    if isinstance(reply, BaseException):
        raise reply
    mark, now, *admitted = reply
    return ScheduleReply(int(mark), int(now),
                         [a.decode() if isinstance(a, bytes) else str(a) for a in admitted])


def tick_of(job_id: str) -> int:
    """The tick (server ms) a schedule's job was admitted for: its id's time part."""
    return ids.timestamp_ms(job_id)


def _cron(expr: object, start_s: int) -> Any:
    try:
        from croniter import croniter
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise InvalidArgument("cron schedules need the extra: pip install 'echomq[cron]'") from None
    if not isinstance(expr, str):
        raise InvalidArgument(f"cron must be a str, not {type(expr).__name__}")
    try:
        return croniter(expr, datetime.fromtimestamp(start_s, UTC))
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidArgument(f"not a cron expression: {expr!r} ({exc})") from None


_SCHEDULE = layout("schedule", ("sched", "pending", "lanes", "meta", "wake", "jobs"),
                    ("name", "floor", "payload", "lane", "max_attempts", "spec", "timeout_ms",
                     "priority", "ids"))
