"""One id is one job across a sharded queue: the reservation of an id in its home shard,
pure (docs/decisions/0040-one-id-one-job-across-shards.md). No I/O.

A sharded queue routes a job by its lane when it has one, else by its id; the id's *home*
is the shard a lane-less admission goes to (``crc16(id) % N``). A laned admission whose
shard is not the home first reserves the id there (``reserve.lua``): the reservation is a
row of the home shard in state ``reserved`` naming the shard the job goes to, so any other
admission of the id (lane-less, or another lane) finds it and answers DUPLICATE.

A reservation whose admission never happened (its client crashed between the two steps) is
repaired by the next admission of the id with another lane, once it is older than the
repair window: the shard it names is first *voided* for the id (a reservation there, with a
time to live, pointing at the new owner: a late admission there answers DUPLICATE), and only
if no job's row is there is the reservation taken over, fenced on the owner and time read
before (the seeds' cross-shard detection: an intent record, a commit checked for, a fence).
"""

from __future__ import annotations

from dataclasses import dataclass

from echomq.core.bounds import check_int
from echomq.core.errors import ServerError
from echomq.protocol.calls import Call, layout
from echomq.protocol.decoders import _raise_if_error, text
from echomq.protocol.keyspace import QueueKeys

__all__ = ["RELEASE_MS", "RESERVED", "SWEEP_BATCH", "VOID_MS", "WINDOW_MS", "Reservation",
           "decode_reservation", "reserve"]

RESERVED = "reserved"
"""The state of a reservation row (never in a state set)."""
WINDOW_MS = 10_000
"""The repair window: a reservation younger than this is left to its admission (the
connector's retry budget: a live client's second step lands within it)."""
VOID_MS = 60_000
"""How long a void outlives the repair that wrote it: a late second step of the crashed
admission, had it been only slow, meets it and answers DUPLICATE."""
RELEASE_MS = 2_000
"""How long the void of a released reservation lasts (an admission that admitted nothing
gives its reservation back): long enough for a concurrent admission of the id in the same
shard, already past its own reservation step, to meet it."""
SWEEP_BATCH = 50
"""Reservations the sweep looks at per shard and pass (the oldest seen first)."""
VERDICTS = ("reserved", "free", "job", "held", "stale")

_RESERVE = layout("reserve", ("job", "meta", "reserved"),
                  ("id", "shard", "window_ms", "ttl_ms", "owner", "at"))


@dataclass(frozen=True, slots=True)
class Reservation:
    """One reply of ``reserve``: the verdict, the shard the row names (a job's state for
    ``job``), and the reservation's server time (ms, as the row holds it)."""

    verdict: str
    shard: str
    at: str


def reserve(k: QueueKeys, job_id: str, shard: str, *, window_ms: int = WINDOW_MS,
            ttl_ms: int = 0, owner: str = "", at: str = "") -> Call:
    """Reserve ``job_id`` in queue ``k`` for sub-queue ``shard`` ('' : probe this shard, or
    with ``owner`` and ``at``, delete that reservation)."""
    check_int("window_ms", window_ms, 0, 86_400_000)
    check_int("ttl_ms", ttl_ms, 0, 86_400_000)
    return Call(_RESERVE, [k.job(job_id), k.meta, k.reserved],
                [job_id, shard, window_ms, ttl_ms, owner, at])


def decode_reservation(reply: object) -> Reservation:
    got = _raise_if_error(reply)
    try:
        verdict, shard, at = (text(x) for x in got)
    except (TypeError, ValueError):
        raise ServerError(f"unexpected reserve reply: {got!r}") from None
    if verdict not in VERDICTS:
        raise ServerError(f"unexpected reserve reply: {got!r}")
    return Reservation(verdict, shard, at)
