"""Online resharding, pure: the record's layout fields and the calls that move a job's row
between layouts (docs/decisions/0032-online-reshard.md). No I/O.

The record ``emq:{q}:shards`` holds, besides ``count``:

* ``epoch``: the layout's generation (absent: 0); a reshard makes the next one, whose
  shards have names of their own (:class:`~echomq.protocol.sharding.ShardLayout`), so a
  retired shard's name never serves again;
* ``moving``: ``"<count>:<epoch>"`` of the layout being prepared while the current one
  is paused and its live jobs move (clients keep the current layout; admissions into a
  retired shard wait for the switch);
* ``from``: ``"<count>:<epoch>"`` of the retired layout whose finished rows are still
  moving into the current one (admission asks it for an id before admitting: one job).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from echomq.protocol.calls import Call, layout
from echomq.protocol.decoders import text
from echomq.protocol.keyspace import QueueKeys
from echomq.protocol.sharding import ShardLayout

__all__ = ["Record", "import_row", "parse_record", "rows_exist", "unload_row"]


@dataclass(frozen=True, slots=True)
class Record:
    """A sharded queue's record: its current layout and any reshard in progress."""

    name: str
    count: int
    epoch: int = 0
    moving: tuple[int, int] | None = None
    from_: tuple[int, int] | None = None

    @property
    def layout(self) -> ShardLayout:
        return ShardLayout(self.name, self.count, self.epoch)

    @property
    def old(self) -> ShardLayout | None:
        """The retired layout still being emptied, if any."""
        return None if self.from_ is None else ShardLayout(self.name, *self.from_)

    @property
    def target(self) -> ShardLayout | None:
        """The layout a reshard in its first phase is preparing, if any."""
        return None if self.moving is None else ShardLayout(self.name, *self.moving)


def _pair(value: str | None) -> tuple[int, int] | None:
    if not value:
        return None
    count, _, epoch = value.partition(":")
    return int(count), int(epoch or "0")


def parse_record(name: str, raw: Mapping[object, object] | None) -> Record | None:
    """The record read by ``HGETALL`` (None: the queue is not sharded)."""
    fields = {text(k): text(v) for k, v in (raw or {}).items()}
    if "count" not in fields:
        return None
    return Record(name, int(fields["count"]), int(fields.get("epoch", "0")),
                  _pair(fields.get("moving")), _pair(fields.get("from")))


_IMPORT = layout("import_row", ("job", "pending", "lanes", "meta", "wake", "inflight", "set",
                                "expiring"),
                 ("id", "state", "score", "held", "fields"))


def import_row(k: QueueKeys, job_id: str, state: str, score: float, held: bool,
               row: Mapping[str, bytes]) -> Call:
    """Write a moved row into queue ``k`` (``state``: the set it was in)."""
    fields: list[str | bytes | int] = []
    for f, v in row.items():
        fields += [f, v]
    return Call(_IMPORT, [k.job(job_id), k.pending, k.lanes, k.meta, k.wake, k.inflight,
                          k.state(state), k.expiring],
                [job_id, state, repr(float(score)) if state != "pending" else "0",
                 "1" if held else "0", *fields])


_UNLOAD = layout("unload_row", ("job", "pending", "delayed", "done", "dead", "inflight", "expired",
                                "expiring"), ("id", "only"))


def unload_row(k: QueueKeys, job_id: str, only: str = "") -> Call:
    """Remove ``job_id``'s row from retired shard ``k`` (only a row in state ``only``, if given)."""
    return Call(_UNLOAD, [k.job(job_id), k.pending, k.delayed, k.done, k.dead, k.inflight,
                          k.expired, k.expiring], [job_id, only])


_EXIST = layout("rows_exist", ("meta", "jobs"), ("ids",))


def rows_exist(k: QueueKeys, ids: Sequence[str]) -> Call:
    return Call(_EXIST, [k.meta, *(k.job(i) for i in ids)], list(ids))
