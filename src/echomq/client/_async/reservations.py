"""One id is one job across a sharded queue: the admission half that reserves an id in its
home shard and repairs a crashed reservation (docs/decisions/0040; the pure half and the
protocol: :mod:`echomq.protocol.reservations`).

* A laned admission whose shard ``t`` is not the id's home ``h`` reserves the id in ``h``
  for ``t`` first; any answer but ``reserved`` is DUPLICATE (nothing admitted anywhere).
* An admission whose shard is the home (lane-less, or a lane that maps there) goes
  straight there, as before; only when it answers DUPLICATE is the row asked whether it
  is a stale reservation, and then repaired.
* The repair voids the shard the reservation named (a late admission there meets a
  reservation and answers DUPLICATE), and if no job's row is there, takes the
  reservation over, fenced on the owner and time it read.
* An admission that reserved but admitted nothing (a dedupe window refused it) gives the
  reservation back the same way (:func:`release`); so does the sweep (:func:`sweep`, run
  by a ShardedConsumer) for a reservation whose job's row is gone.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from echomq.core import ids as branded
from echomq.core.errors import EchoMQError, ServerError, ShardCountMismatch
from echomq.core.model import Verdict
from echomq.protocol.decoders import text
from echomq.protocol.reservations import (
    RELEASE_MS,
    SWEEP_BATCH,
    VOID_MS,
    Reservation,
    decode_reservation,
    reserve,
)
from echomq.protocol.sharding import RETIRED, translate

if TYPE_CHECKING:
    from echomq.client._async.queue import AsyncQueue
    from echomq.client._async.sharded_base import AsyncShardedBase

Answer = Verdict | EchoMQError

__all__ = ["admit_one", "recheck_many", "release", "release_many", "repair", "reserve_many", "sweep"]


async def _ask(sq: AsyncShardedBase, shard: AsyncQueue, job_id: str, target: str, *,
               ttl_ms: int = 0, owner: str = "", at: str = "") -> Reservation:
    return decode_reservation(await shard.connector.run(reserve(
        shard.k, job_id, target, window_ms=sq.reserve_window_ms, ttl_ms=ttl_ms, owner=owner,
        at=at)))


def _homes(sq: AsyncShardedBase, job_id: object, lane: object) -> tuple[int, int] | None:
    """(target, home) shard indexes of an id that can be reserved, else None."""
    if not isinstance(job_id, str) or not job_id.startswith("JOB") or not branded.valid(job_id):
        return None  # the shard's admission answers it (KIND, or its typed error)
    if lane is not None and not isinstance(lane, str):
        return None
    return sq.layout.index(job_id, lane), sq.layout.index(job_id)


async def repair(sq: AsyncShardedBase, home: int, job_id: str, got: Reservation,
                 target: int) -> Reservation:
    """Take over the stale reservation ``got`` (read in shard ``home``) for shard
    ``target``: void the shard it names, then replace it if it is still as read.
    ``reserved`` (or ``free`` when ``target`` is the home): the caller admits; any other
    verdict: the id is someone's job (DUPLICATE)."""
    dest = sq.shards[target].name
    owner = next((s for s in sq.shards if s.name == got.shard), None)
    if owner is not None:
        void = await _ask(sq, owner, job_id, dest, ttl_ms=VOID_MS)
        if void.verdict == "job":  # the admission there landed after all: one job, there
            return void
    return await _ask(sq, sq.shards[home], job_id, "" if target == home else dest,
                      owner=got.shard, at=got.at)


async def release(sq: AsyncShardedBase, home: int, job_id: str, got: Reservation,
                  target: int) -> None:
    """The admission in ``target`` admitted nothing (a dedupe window refused or replaced
    it, or the id is a job there): unless a job's row is there, void ``target`` for a
    moment (a concurrent admission of the id there, which found the same reservation,
    answers DUPLICATE) and delete the reservation ``got``, fenced on what it holds."""
    void = await _ask(sq, sq.shards[target], job_id, sq.shards[home].name, ttl_ms=RELEASE_MS)
    if void.verdict != "job":
        await _ask(sq, sq.shards[home], job_id, "", owner=got.shard, at=got.at)


async def admit_one(sq: AsyncShardedBase, job_id: str, lane: str | None,
                    send: Callable[[AsyncQueue], Awaitable[Verdict]]) -> Verdict:
    """Admit one job through ``send`` on its shard, one job per id across the queue."""
    where = _homes(sq, job_id, lane)
    if where is None:  # the shard's admission gives the typed error (or KIND)
        return await send(sq.shards[sq.layout.index(job_id, lane)])
    target, home = where
    if target != home:
        got = await _ask(sq, sq.shards[home], job_id, sq.shards[target].name)
        if got.verdict == "stale":
            got = await repair(sq, home, job_id, got, target)
        if got.verdict != "reserved":
            return Verdict.DUPLICATE
        verdict = await send(sq.shards[target])
        if verdict is not Verdict.ENQUEUED:
            await release(sq, home, job_id, got, target)
        return verdict
    verdict = await send(sq.shards[home])
    if verdict is Verdict.DUPLICATE:
        got = await _ask(sq, sq.shards[home], job_id, "")
        if got.verdict == "stale" and (await repair(sq, home, job_id, got, home)).verdict == "free":
            return await send(sq.shards[home])
    return verdict


def _fields(item: Any) -> tuple[Any, ...]:
    """An item as (id, payload) or (id, payload, lane); () for a malformed one."""
    try:
        fields = tuple(item)
    except TypeError:
        return ()
    return (*fields, None) if len(fields) == 2 else fields


def _error(reply: BaseException, name: str) -> EchoMQError:
    exc = reply if isinstance(reply, EchoMQError) else ServerError(f"reserve failed: {reply!r}")
    return translate(exc, name)


async def reserve_many(sq: AsyncShardedBase, items: list[Any], todo: list[int],
                       check: Callable[[int], None],
                       out: list[Verdict | EchoMQError], made: dict[int, tuple[int, int, Reservation]],
                       ) -> tuple[list[int], ShardCountMismatch | None]:
    """Reserve, pipelined, every laned item of ``todo`` whose shard is not its id's home
    (``check(i)`` raises for an item its admission would refuse: it is not reserved and
    gets its typed error there). Items answered DUPLICATE or an error get it in ``out``.
    Returns the items still to send, and a retired shard's refusal if one came (then
    nothing is sent this round: the caller follows the reshard and runs it again); each
    reservation made goes in ``made`` (its home, target and reply)."""
    calls, where = [], []
    for i in todo:
        fields = _fields(items[i])
        dest = _homes(sq, fields[0], fields[2]) if len(fields) == 3 and fields[2] is not None \
            else None
        if dest is None or dest[0] == dest[1]:
            continue
        try:
            check(i)
        except EchoMQError:
            continue
        calls.append(reserve(sq.shards[dest[1]].k, fields[0], sq.shards[dest[0]].name,
                             window_ms=sq.reserve_window_ms))
        where.append((i, fields[0], *dest))
    replies = await sq.connector.pipeline(calls) if calls else []
    dropped: set[int] = set()
    for (i, job_id, target, home), reply in zip(where, replies, strict=True):
        try:
            if isinstance(reply, BaseException):
                raise _error(reply, sq.name)
            got = decode_reservation(reply)
            if got.verdict == "stale":
                got = await repair(sq, home, job_id, got, target)
        except EchoMQError as exc:
            exc = translate(exc, sq.name)
            if isinstance(exc, ShardCountMismatch) and RETIRED in str(exc):
                return todo, exc
            out[i] = exc
            dropped.add(i)
            continue
        if got.verdict != "reserved":
            out[i] = Verdict.DUPLICATE
            dropped.add(i)
        else:
            made[i] = (home, target, got)
    return [i for i in todo if i not in dropped], None


async def release_many(sq: AsyncShardedBase, items: list[Any], out: list[Verdict | EchoMQError],
                       made: dict[int, tuple[int, int, Reservation]]) -> None:
    """:func:`release` for each item reserved whose admission admitted nothing."""
    for i, (home, target, got) in made.items():
        if out[i] is not Verdict.ENQUEUED and not isinstance(out[i], ShardCountMismatch):
            await release(sq, home, _fields(items[i])[0], got, target)


async def recheck_many(sq: AsyncShardedBase, items: list[Any], out: list[Verdict | EchoMQError],
                       send: Callable[[AsyncQueue, Any], Awaitable[Answer]]) -> None:
    """The items answered DUPLICATE by their id's home shard: a stale reservation there
    is repaired and the item sent again (``send(shard, item)``)."""
    probes = []
    for i, verdict in enumerate(out):
        if verdict is not Verdict.DUPLICATE:
            continue
        fields = _fields(items[i])
        dest = _homes(sq, fields[0], fields[2]) if len(fields) in (2, 3) else None
        if dest is not None and dest[0] == dest[1]:
            probes.append((i, fields[0], dest[1]))
    if not probes:
        return
    replies = await sq.connector.pipeline([reserve(sq.shards[h].k, job_id, "",
                                                   window_ms=sq.reserve_window_ms)
                                           for _, job_id, h in probes])
    for (i, job_id, home), reply in zip(probes, replies, strict=True):
        if isinstance(reply, BaseException):
            continue  # the DUPLICATE stands: the row is there
        got = decode_reservation(reply)
        if got.verdict == "stale" and (await repair(sq, home, job_id, got, home)).verdict == "free":
            out[i] = await send(sq.shards[home], items[i])


async def sweep(sq: AsyncShardedBase, *, limit: int = SWEEP_BATCH) -> int:
    """One pass of the sweep of reservations (decision 0040, "Lifetime"): in each shard,
    the ``limit`` reservations the sweep saw least recently; one older than the repair
    window whose job's row is gone from the shard it names is given back (that shard voided
    for a moment, then the fenced delete); one whose job is there goes to the back of the
    list. Returns how many were given back. Safe to run by many consumers at once."""
    await sq._ready()
    names = {s.name: i for i, s in enumerate(sq.shards)}
    given = 0
    for shard in sq.shards:
        for raw in await sq.connector.command("ZRANGE", shard.k.reserved, 0, limit - 1):
            job_id = text(raw)
            got = await _ask(sq, shard, job_id, "")  # an id whose row went is unlisted here
            if got.verdict != "stale":
                continue  # young (its admission may be on its way), gone, or a job
            target = names.get(got.shard)
            if target is not None:
                void = await _ask(sq, sq.shards[target], job_id, shard.name, ttl_ms=RELEASE_MS)
                if void.verdict == "job":
                    await _ask(sq, shard, job_id, got.shard)  # its job is there: to the back
                    continue
            freed = await _ask(sq, shard, job_id, "", owner=got.shard, at=got.at)
            given += freed.verdict == "free"
    return given
