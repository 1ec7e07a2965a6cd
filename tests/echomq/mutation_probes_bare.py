"""Targeted probes of a queue's meta 'bare' and 'plain' at the finish (decision 0050): the
finish of a queue whose meta says no row has a parent or a cancel request ('bare'), nor a
lane ('plain'), reads a row's state and attempt only; every script that gives a row one of
those clears the flag, and each probe here drives one of those clears to the finish that
depends on it. Part of ``PROBES`` (tests/echomq/mutation_probes.py), same contract:
``async def probe(conn, name)``, AssertionError when the server does not keep the guarantee.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from echomq import AsyncQueue, CancelOutcome, Lease, Verdict, generate
from echomq.core.model import Completion
from echomq.protocol.flows import FlowSpec, flow_parent, member
from echomq.protocol.resharding import import_row


async def _bare(conn: Any, name: str) -> AsyncQueue:
    """A queue made by a plain admission (meta 'plain' and 'bare'), its one job finished."""
    q = AsyncQueue(conn, name)
    first = generate("JOB")
    assert await q.enqueue_many([(first, b"plain")]) == [Verdict.ENQUEUED]
    assert await q.complete(await _one(q, first)) is Completion.COMPLETED
    return q


async def _one(q: AsyncQueue, jid: str) -> Lease:
    """Claim what ``q`` leases now: exactly the job ``jid``."""
    got = await q.claim(5, lease_ms=60_000)
    assert [x.id for x in got] == [jid], got
    return got[0]


async def a_cancel_on_a_bare_queue_is_read(conn: Any, name: str) -> None:
    """Running jobs of a bare queue asked to stop end cancelled, not done, by complete and
    by complete_batch alike (cancel clears the queue's 'bare')."""
    q = await _bare(conn, name)
    a, b = generate("JOB"), generate("JOB")
    await q.enqueue_many([(a, b"a"), (b, b"b")])
    leases = {x.id: x for x in await q.claim(2, lease_ms=60_000)}
    assert await q.cancel([a, b]) == [CancelOutcome.ASKED, CancelOutcome.ASKED]
    assert await q.complete(leases[a]) is Completion.CANCELLED
    assert await q.complete_many([leases[b]]) == [Completion.CANCELLED]


async def a_flow_child_on_a_bare_queue_tells_its_parent(conn: Any, name: str) -> None:
    """Children held in a bare queue (flow_hold clears 'bare') settle their parent when
    they complete, by complete and by complete_batch: the parent is released."""
    q = await _bare(conn, name)
    pid, c1, c2 = generate("JOB"), generate("JOB"), generate("JOB")
    await q.admit_flow(parent=(pid, b"p"), children=[(name, c1, b"1"), (name, c2, b"2")])
    leases = {x.id: x for x in await q.claim(2, lease_ms=60_000)}
    assert set(leases) == {c1, c2}, leases
    await q.complete(leases[c1])
    await q.complete_many([leases[c2]])
    assert [x.id for x in await q.claim(5, lease_ms=60_000)] == [pid]


async def an_inner_parent_on_a_bare_queue_tells_its_parent(conn: Any, name: str) -> None:
    """An inner parent of a chain admitted waiting into a bare queue (flow_admit with a
    parent clears 'bare'; its child lives in another queue) leaves the notice for its own
    parent when it completes."""
    q, top, leafq = await _bare(conn, name), AsyncQueue(conn, name + "-t"), AsyncQueue(conn, name + "-l")
    root, mid, leaf = generate("JOB"), generate("JOB"), generate("JOB")
    tree = FlowSpec(top.name, root, b"r", (FlowSpec(name, mid, b"m", (FlowSpec(leafq.name, leaf, b"l"),)),))
    assert await q.flows.admit_tree(tree)
    x = await _one(leafq, leaf)
    await leafq.complete(x)
    assert await conn.run(flow_parent(q.k, "settle", mid, member(leaf, leafq.name), "done")) == 2
    assert await q.complete(await _one(q, mid)) is Completion.COMPLETED
    assert await conn.command("HGET", q.k.finished, mid) == f"done:{root}:{top.name}".encode()


async def a_lane_on_a_plain_queue_is_released(conn: Any, name: str) -> None:
    """Serial-lane jobs admitted into a bare, plain queue (admit clears 'plain') release
    their lane when they complete, by complete and by complete_batch: the next one runs."""
    q = await _bare(conn, name)
    a, b, c = generate("JOB"), generate("JOB"), generate("JOB")
    for jid in (a, b, c):
        await q.admit(jid, b"s", lane="s", serial=True)
    assert await q.complete(await _one(q, a)) is Completion.COMPLETED
    assert await q.complete_many([await _one(q, b)]) == [Completion.COMPLETED]
    assert [z.id for z in await q.claim(5, lease_ms=60_000)] == [c]  # b's lane released


async def an_older_clients_lane_is_released(conn: Any, name: str) -> None:
    """A serial-lane job in a queue whose meta still says 'plain' (as an older client's
    admission leaves it) releases its lane when it completes: the claim that read its lane
    cleared 'plain', so the finish reads it too."""
    q = await _bare(conn, name)
    a, b = generate("JOB"), generate("JOB")
    await q.admit(a, b"a", lane="s", serial=True)
    await q.admit(b, b"b", lane="s", serial=True)
    await conn.command("HSET", q.k.meta, "plain", "1")  # what an older client leaves
    assert await q.complete_many([await _one(q, a)]) == [Completion.COMPLETED]
    assert [z.id for z in await q.claim(5, lease_ms=60_000)] == [b]  # a's lane released


async def an_imported_parent_on_a_bare_queue_is_read(conn: Any, name: str) -> None:
    """A row with a parent moved by a reshard into a bare shard (import_row clears 'bare')
    leaves the notice for its parent when it completes."""
    q = await _bare(conn, name)
    jid, parent = generate("JOB"), f"{generate('JOB')}:{name}-p"
    row = {"state": b"pending", "attempts": b"0", "payload": b"x", "parent": parent.encode()}
    assert await conn.run(import_row(q.k, jid, "pending", 0, False, row)) == 1
    assert await q.complete(await _one(q, jid)) is Completion.COMPLETED
    assert await conn.command("HGET", q.k.finished, jid) == f"done:{parent}".encode()


BARE_PROBES: dict[str, Callable[[Any, str], Awaitable[None]]] = {p.__name__: p for p in (
    a_cancel_on_a_bare_queue_is_read, a_flow_child_on_a_bare_queue_tells_its_parent,
    an_inner_parent_on_a_bare_queue_tells_its_parent, a_lane_on_a_plain_queue_is_released,
    an_older_clients_lane_is_released, an_imported_parent_on_a_bare_queue_is_read)}
