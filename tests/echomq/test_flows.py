"""Flows (docs/decisions/0038-flows.md), on one server and on the 3+3 cluster: a parent
waits for children in two queues on different cluster slots, is released exactly once after
the last child ended, follows its failure policy, survives a relay repeated after a crash
between its two steps, and a half-admitted flow is repaired (dropped or finished)."""

from __future__ import annotations

from typing import Any

import pytest

from echomq import AsyncQueue, Completion, InvalidArgument, QueueOptions, generate
from echomq.client._async.flows import FlowAbandoned
from echomq.protocol import flows as f
from echomq.protocol.keyspace import slot


def other_slot(name: str) -> str:
    """A queue name whose slot is in another third of the slot range (another primary of
    the 3+3 cluster) than ``name``'s."""
    third = slot("emq:{" + name + "}:x") * 3 // 16384
    return next(n for i in range(100) if (n := f"{name}-b{i}")
                and slot("emq:{" + n + "}:x") * 3 // 16384 != third)


async def _flow(q: AsyncQueue, other: AsyncQueue, n_other: int = 2, n_same: int = 1,
                policy: str = "fail") -> tuple[str, list[tuple[str, str, bytes]]]:
    pid = generate("JOB")
    kids = [(other.name, generate("JOB"), b"o%d" % i) for i in range(n_other)]
    kids += [(q.name, generate("JOB"), b"s%d" % i) for i in range(n_same)]
    assert await q.admit_flow(parent=(pid, b"parent"), children=kids, on_child_failure=policy)
    return pid, kids


async def _state(q: AsyncQueue, job_id: str) -> str:
    row = await q.job(job_id)
    return row["state"].decode() if row else "gone"


async def _finish_all(q: AsyncQueue, n: int, result: bytes = b"r") -> list[str]:
    leases = await q.claim(n, lease_ms=60_000)
    for lease in leases:
        await q.complete(lease, result + lease.payload)
    return [x.id for x in leases]


async def test_a_parent_waits_for_children_on_two_slots_and_is_released_once(queue: AsyncQueue) -> None:
    other = AsyncQueue(queue.connector, other_slot(queue.name))
    pid, kids = await _flow(queue, other)
    assert await _state(queue, pid) == "waiting"
    # the parent is not claimable: only the same-slot child is leased here
    same = await queue.claim(10, lease_ms=60_000)
    assert [x.id for x in same] == [kids[2][1]]
    assert (await queue.flows.relay(queue.name)).relayed == 0  # nothing ended yet
    await _finish_all(other, 1)
    report = await other.flows.relay(other.name)
    assert (report.relayed, report.released) == (1, 0)
    assert await _state(queue, pid) == "waiting"
    assert (await other.flows.relay(other.name)).relayed == 0  # the notice is gone
    await _finish_all(other, 1)
    assert (await other.flows.relay(other.name)).released == 0  # the same-slot child runs
    assert await _state(queue, pid) == "waiting"
    await queue.complete(same[0], b"last")  # the same-slot child settles its parent itself
    assert await _state(queue, pid) == "pending"
    assert await queue.connector.command("HLEN", queue.k.finished) == 0  # no notice written
    assert (await queue.flows.relay(queue.name)).relayed == 0  # nothing left for the relay
    assert [x.id for x in await queue.claim(10, lease_ms=60_000)] == [pid]
    row = await queue.job(pid)
    assert row is not None and row["released"] == b"1"
    assert await queue.connector.command("HGET", queue.k.flows, "released") == b"1"  # the server's count


async def test_release_after_the_last_child_reads_the_children_results(queue: AsyncQueue) -> None:
    other = AsyncQueue(queue.connector, other_slot(queue.name))
    pid, kids = await _flow(queue, other, n_other=3, n_same=2)
    same = await queue.claim(2, lease_ms=60_000)
    assert sorted(x.id for x in same) == sorted(k[1] for k in kids[3:])  # not the parent
    await queue.complete_many(same, [b"r" + x.payload for x in same])  # complete_batch
    assert (await queue.flows.relay(queue.name)).relayed == 0  # settled in complete_batch
    assert await _state(queue, pid) == "waiting"
    assert (await queue.job(pid) or {})["settled"] == b"2"
    await _finish_all(other, 3)
    report = await other.flows.relay(other.name)
    assert (report.relayed, report.released) == (3, 1)
    assert await _state(queue, pid) == "pending"
    assert (await other.flows.relay(other.name)).released == 0
    nodes = await queue.children(pid)
    assert [(n.queue, n.id) for n in nodes] == [(k[0], k[1]) for k in kids]
    assert {n.outcome for n in nodes} == {"done"}
    assert {n.id: n.result for n in nodes} == {k[1]: b"r" + k[2] for k in kids}
    parent = await queue.claim(1, lease_ms=60_000)
    assert [x.id for x in parent] == [pid]
    row = await queue.job(pid)
    assert row is not None and row["settled"] == b"5" and row["children"] == b"5"


async def test_a_relay_repeated_after_a_crash_between_settle_and_ack_changes_nothing(
        queue: AsyncQueue) -> None:
    other = AsyncQueue(queue.connector, other_slot(queue.name))
    pid, _ = await _flow(queue, other, n_other=2, n_same=0)
    await _finish_all(other, 2)
    c = queue.connector
    # the relay's first step ran for every notice, then the relay died (no ack)
    notes = await c.command("HGETALL", other.k.finished)
    assert isinstance(notes, dict) and len(notes) == 2
    verdicts = []
    for raw_id, raw_note in notes.items():
        cid, outcome = raw_id.decode(), raw_note.decode().partition(":")[0]
        verdicts.append(await c.run(f.flow_parent(queue.k, "settle", pid, f.member(cid, other.name),
                                                  outcome)))
    assert sorted(verdicts) == [1, 2]  # counted, then released: once
    again = await other.flows.relay(other.name)  # the next relay repeats both settles
    assert (again.relayed, again.released) == (2, 0)
    assert await _state(queue, pid) == "pending"
    row = await queue.job(pid)
    assert row is not None and row["settled"] == b"2"
    assert await c.command("ZCARD", queue.k.pending) == 1


async def test_a_failed_child_fails_the_parent_by_default(conn: Any, qname: str) -> None:
    q = AsyncQueue(conn, qname, options=QueueOptions(max_attempts=1))
    other = AsyncQueue(conn, other_slot(qname), options=QueueOptions(max_attempts=1))
    pid, _ = await _flow(q, other, n_other=2, n_same=0)
    leases = await other.claim(2, lease_ms=60_000)
    await other.retry(leases[0], delay_ms=0, error="boom")  # max_attempts 1: dead
    report = await other.flows.relay(other.name)
    assert (report.relayed, report.failed) == (1, 1)
    row = await q.job(pid)
    assert row is not None and row["state"] == b"dead"
    assert b"dead" in row["error"]
    await other.complete(leases[1], b"late")
    assert (await other.flows.relay(other.name)).relayed == 1  # spent: the parent is dead
    assert await _state(q, pid) == "dead"
    counts = await conn.command("HMGET", q.k.flows, "released", "failed")
    assert counts == [None, b"1"]  # the server's counts: one failed by policy, none released


async def test_continue_and_ignore_release_the_parent_with_the_failures_recorded_or_not(
        conn: Any, qname: str) -> None:
    q = AsyncQueue(conn, qname, options=QueueOptions(max_attempts=1))
    other = AsyncQueue(conn, other_slot(qname), options=QueueOptions(max_attempts=1))
    for policy, failed in (("continue", b"1"), ("ignore", None)):
        pid, _ = await _flow(q, other, n_other=2, n_same=0, policy=policy)
        leases = await other.claim(2, lease_ms=60_000)
        await other.retry(leases[0], delay_ms=0, error="boom")
        await other.complete(leases[1], b"ok")
        assert (await other.flows.relay(other.name)).released == 1
        row = await q.job(pid)
        assert row is not None and row["state"] == b"pending" and row.get("failed") == failed
        outcomes = {n.id: n.outcome for n in await q.children(pid)}
        assert outcomes == {leases[0].id: "dead", leases[1].id: "done"}
        await _finish_all(q, 1)


async def test_a_crash_before_the_parent_leaves_no_runnable_child_and_repair_drops_it(
        queue: AsyncQueue) -> None:
    other = AsyncQueue(queue.connector, other_slot(queue.name))
    pid, cid = generate("JOB"), generate("JOB")
    c = queue.connector
    assert await c.run(f.flow_hold(other.k, cid, b"x", f.member(pid, queue.name))) == 1
    assert await other.claim(5, lease_ms=60_000) == []  # held: not claimable
    assert await queue.flows.repair(other.name, older_than_ms=60_000) == (0, 0)  # too young
    assert await queue.flows.repair(other.name, older_than_ms=0) == (0, 1)
    assert await other.job(cid) is None
    assert await _state(queue, pid) == "cancelled"  # the tombstone
    # the slow admission that comes back now is refused, and drops its held children
    with pytest.raises(FlowAbandoned):
        await queue.admit_flow(parent=(pid, b"p"), children=[(other.name, cid, b"x")])
    # its child is held again, never runnable, and the repair drops it (a producer deletes nothing)
    assert await _state(other, cid) == "held" and await other.claim(5, lease_ms=60_000) == []
    assert await queue.flows.repair(other.name, older_than_ms=0) == (0, 1)
    assert await other.job(cid) is None


async def test_a_crash_after_the_parent_is_finished_by_repair(queue: AsyncQueue) -> None:
    other = AsyncQueue(queue.connector, other_slot(queue.name))
    pid, cid = generate("JOB"), generate("JOB")
    c = queue.connector
    assert await c.run(f.flow_hold(other.k, cid, b"x", f.member(pid, queue.name))) == 1
    assert await c.run(f.flow_admit(queue.k, pid, b"p", policy="fail",
                                    children=[f.member(cid, other.name)])) == 1
    assert await queue.flows.repair(other.name, older_than_ms=0) == (1, 0)  # started
    await _finish_all(other, 1)
    assert (await other.flows.relay(other.name)).released == 1
    # a retried admission of the same flow is a duplicate, not an error
    assert not await queue.admit_flow(parent=(pid, b"p"), children=[(other.name, cid, b"x")])


async def test_cancelling_a_flow_cancels_waiting_children_and_asks_running_ones(
        queue: AsyncQueue) -> None:
    other = AsyncQueue(queue.connector, other_slot(queue.name))
    pid, kids = await _flow(queue, other, n_other=2, n_same=0)
    running = (await other.claim(1, lease_ms=60_000))[0]
    assert await queue.cancel_flow(pid)
    assert await _state(queue, pid) == "cancelled"
    states = {n.id: n.state for n in await queue.children(pid)}
    waiting = next(k[1] for k in kids if k[1] != running.id)
    assert states[waiting] == "cancelled"
    row = await other.job(running.id)
    assert row is not None and row["state"] == b"active" and "cancel" in row
    assert await other.complete(running, b"r") == Completion.CANCELLED
    report = await other.flows.relay(other.name)
    assert report.relayed == 2 and report.released == 0
    assert await _state(queue, pid) == "cancelled"


async def test_a_child_that_is_an_existing_job_is_refused_and_nothing_is_left(
        queue: AsyncQueue) -> None:
    other = AsyncQueue(queue.connector, other_slot(queue.name))
    taken = generate("JOB")
    await other.enqueue(taken, b"x")
    fresh, pid = generate("JOB"), generate("JOB")
    with pytest.raises(InvalidArgument, match=taken):
        await queue.admit_flow(parent=(pid, b"p"),
                               children=[(other.name, fresh, b"a"), (other.name, taken, b"b")])
    assert await queue.job(pid) is None
    assert await _state(other, fresh) == "held"  # never runnable; left to the repair
    assert [x.id for x in await other.claim(5, lease_ms=60_000)] == [taken]
    assert await queue.flows.repair(other.name, older_than_ms=0) == (0, 1)
    assert await other.job(fresh) is None


def test_echomq_flow_prints_the_tree_with_each_state(valkey_url: str, qname: str) -> None:
    """``echomq flow QUEUE ID``: the parent's line, then one line per child with its state
    and the outcome relayed; a job that is not there is one line and exit 4."""
    from click.testing import CliRunner

    from echomq import Connector, Queue
    from echomq.ops.cli import main

    conn = Connector.from_url(valkey_url)
    q, other = Queue(conn, qname), Queue(conn, other_slot(qname))
    pid, a, b = generate("JOB"), generate("JOB"), generate("JOB")
    try:
        q.admit_flow(parent=(pid, b"p"), children=[(other.name, a, b"a"), (qname, b, b"b")])
        (lease,) = other.claim(1, lease_ms=60_000)
        other.complete(lease, b"r")
        other.flows.relay(other.name)
        run = CliRunner(env={"ECHOMQ_URL": None}).invoke(
            main, ["flow", qname, pid, "--url", valkey_url], prog_name="echomq")
        assert run.exit_code == 0, run.output
        assert run.stdout.splitlines() == [
            f"{pid} ({qname}) waiting, 1/2 children settled, on child failure: fail",
            f"├── {a} ({other.name}) done [done]",
            f"└── {b} ({qname}) pending",
        ]
        run = CliRunner(env={"ECHOMQ_URL": None}).invoke(
            main, ["flow", qname, generate("JOB"), "--url", valkey_url], prog_name="echomq")
        assert run.exit_code == 4 and "no such job" in run.stderr and "Traceback" not in run.stderr
    finally:
        conn.close()


async def test_a_notice_for_a_parent_of_another_major_version_waits_and_stops_nothing(
        queue: AsyncQueue) -> None:
    other = AsyncQueue(queue.connector, other_slot(queue.name))
    pid, _ = await _flow(queue, other, n_other=1, n_same=0)
    await _finish_all(other, 1)
    c = queue.connector
    await c.command("HSET", queue.k.meta, "protocol", "echomq:4.0.0")
    assert (await other.flows.relay(other.name)).relayed == 0  # kept, and no error raised
    assert await c.command("HLEN", other.k.finished) == 1
    await c.command("HSET", queue.k.meta, "protocol", "echomq:3.0.0")
    assert (await other.flows.relay(other.name)).released == 1
    assert await _state(queue, pid) == "pending"
