"""The layout of a sharded queue: which sub-queues, which slots, which shard a job goes to.
Pure: no I/O (docs/decisions/0020-sharded-queues.md).

A queue created with ``shards=N`` is N ordinary queues, its *shards*, each with its own
hash tag, plus one record ``emq:{q}:shards`` (a hash, ``count`` = N) that every client
checks before its first call. Shard ``i`` of ``N`` is the queue named ``q#i/N`` (keys
``emq:{q#i/N}:*``), or ``q#i/N~k`` for the smallest ``k`` whose slot falls in the middle
half of the ``i``-th of N equal slot ranges. A cluster whose slots are split evenly over
P primaries (what ``CLUSTER ADDSLOTSRANGE`` in equal parts and ``valkey-cli --cluster
create`` do) therefore holds N/P shards on each primary when P divides N, and shard i on
primary ``i*P // N``: consecutive shards sit side by side, so 3 shards on 3 primaries are
on 3 different nodes (tests/echomq/test_sharding.py checks it on the local cluster).

A job's shard is a function of its lane when it has one (so a lane's jobs, and a serial
lane's order, stay in one shard), else of its id: ``crc16(key) % N``. An id is one job
across the shards whatever lane it carries: a laned admission whose shard is not the id's
own (its *home*) first reserves the id there (:mod:`echomq.protocol.reservations`,
decision 0040).

Changing N is online (:func:`echomq.client._async.reshard.reshard`, decision 0032): a new
layout has a new epoch (shards ``q#i/N@epoch``); the old shards' meta records
:data:`RETIRED` as their protocol, so every script a client still on them runs is refused
by the version fence, which the sharded queue reports as :class:`ShardCountMismatch` (and
a client that was following the queue answers by moving to the new layout).

The logical name itself is no queue: its meta records :data:`SHARDED` as its protocol, so a
plain client on it is refused by every script's fence (``ShardCountMismatch``) instead of
admitting jobs no sharded consumer looks at (issue 29 item 3).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from echomq.core.bounds import check_int
from echomq.core.errors import (
    EchoMQError,
    InvalidArgument,
    InvalidJobId,
    InvalidQueueName,
    ProtocolVersionError,
    ShardCountMismatch,
)
from echomq.protocol import keyspace

__all__ = ["MAX_SHARDS", "RETIRED", "ShardLayout", "record_key", "refusals", "retired_marker",
           "translate"]

# Each consumer holds one wake subscription and one upkeep loop per shard; 64 shards is
# ten times the primaries of a large cluster and keeps that cost bounded.
MAX_SHARDS = 64
RETIRED = "echomq-retired"
"""The protocol a retired shard's meta records (no ``echomq:<major>.`` prefix, so the
version fence of every script refuses it)."""
_SUFFIX = len("#63/64~999")


def record_key(name: str) -> str:
    """``emq:{q}:shards``: the hash holding the shard count of queue ``q``."""
    return keyspace.queue_key(name, "shards")


SHARDED = "echomq-sharded"
"""The protocol the logical name's own meta (``emq:{q}:meta``) records once the queue is
sharded: every script a plain :class:`~echomq.AsyncQueue` on that name runs is refused by
its version fence (the marker is in the name's own slot, so no script needs another key),
and the reply is raised as :class:`ShardCountMismatch` (``echomq.protocol.codes``)."""


def retired_marker(count: int) -> str:
    return f"{RETIRED}:shards={count}"


def _pick_name(name: str, i: int, count: int, epoch: int = 0) -> str:
    width = keyspace.SLOTS / count
    lo, hi = i * width + width / 4, (i + 1) * width - width / 4
    base = f"{name}#{i}/{count}" + (f"@{epoch}" if epoch else "")
    for k in range(1000):
        sub = base if k == 0 else f"{base}~{k}"
        if lo <= keyspace.crc16(sub.encode()) % keyspace.SLOTS < hi:
            return sub
    raise AssertionError("no tag found")  # pragma: no cover - 1000 tries, each 1 in 2


@dataclass(frozen=True, slots=True)
class ShardLayout:
    """The N sub-queue names of queue ``name`` and the rule that routes a job to one."""

    name: str
    count: int
    # The layout's generation: 0 for a queue never resharded; each online reshard makes
    # a new one (docs/decisions/0032-online-reshard.md), whose shards are named
    # ``q#i/N@epoch``, so a shard name never comes back after it was retired.
    epoch: int = 0
    names: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        keyspace.check_queue(self.name)
        check_int("epoch", self.epoch, 0, 10**9)
        room = keyspace.MAX_QUEUE_NAME - _SUFFIX - (len(f"@{self.epoch}") if self.epoch else 0)
        if len(self.name) > room:
            raise InvalidQueueName(f"a sharded queue's name is at most {room} characters")
        if isinstance(self.count, bool):
            raise InvalidArgument("shards must be an int")
        check_int("shards", self.count, 1, MAX_SHARDS)
        object.__setattr__(self, "names", tuple(
            _pick_name(self.name, i, self.count, self.epoch) for i in range(self.count)))

    def index(self, job_id: str, lane: str | None = None) -> int:
        """The shard of a job: by its lane when it has one, else by its id."""
        if lane is not None and not isinstance(lane, str):
            raise InvalidArgument(f"lane must be a str, not {type(lane).__name__}")
        if lane is None and not isinstance(job_id, str):
            raise InvalidJobId(f"not a branded id: {job_id!r}")
        key = lane if lane is not None else job_id
        return keyspace.crc16(key.encode()) % self.count

    def index_of_queue(self, sub: str) -> int:
        """The shard index of sub-queue ``sub`` (a lease names it), else InvalidArgument."""
        try:
            return self.names.index(sub)
        except ValueError:
            raise InvalidArgument(
                f"lease of queue {sub!r} given to sharded queue {self.name!r}") from None

    def check_count(self, recorded: int) -> None:
        """ShardCountMismatch unless ``recorded`` is this layout's count."""
        if recorded != self.count:
            raise ShardCountMismatch(
                f"queue {self.name!r} has {recorded} shards, this client was built with "
                f"shards={self.count}: build it with shards={recorded} (or reshard)")


def translate(exc: EchoMQError, name: str) -> EchoMQError:
    """A shard's version-fence refusal caused by a reshard, as ShardCountMismatch."""
    if isinstance(exc, ProtocolVersionError) and not isinstance(exc, ShardCountMismatch) \
            and RETIRED in str(exc):
        out = ShardCountMismatch(
            f"queue {name!r} was resharded ({exc}): build the client with the new shard count")
        out.__cause__ = exc
        return out
    return exc


@contextlib.contextmanager
def refusals(name: str) -> Iterator[None]:
    """Raise a retired shard's refusal as ShardCountMismatch."""
    try:
        yield
    except ProtocolVersionError as exc:
        raise translate(exc, name) from exc
