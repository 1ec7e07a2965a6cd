"""A flow job's own options (decision 0041; issue 27): a child's lane, serial lane,
priority, attempt limit, handler timeout, delay and deadline apply when it starts; a
parent's when it is released (in the child's own script when it is in the parent's slot, by
the relay otherwise). On one server and on the 3+3 cluster; checked before any write."""

from __future__ import annotations

from typing import Any

import pytest

from echomq import AsyncQueue, InvalidArgument, QueueOptions, RetryOutcome, generate
from echomq.protocol import flows as f
from echomq.protocol.calls import Call
from echomq.protocol.flows import FlowSpec, StepOptions
from tests.echomq.test_flows import other_slot


async def _row(q: AsyncQueue, job_id: str) -> dict[str, bytes]:
    row = await q.job(job_id)
    assert row is not None, job_id
    return row


async def _promoted(q: AsyncQueue, job_id: str) -> None:
    """Promote until ``job_id`` is pending (its due time is the server's; no sleep)."""
    for _ in range(100_000):
        await q.promote()
        if (await _row(q, job_id))["state"] == b"pending":
            return
    raise AssertionError(f"{job_id} never became pending")


async def test_a_childs_options_apply_when_it_starts(conn: Any, qname: str) -> None:
    q = AsyncQueue(conn, qname, options=QueueOptions(max_attempts=5))
    plain = generate("JOB")
    await q.enqueue(plain, b"x")  # a plain job waiting first
    ids = {n: generate("JOB") for n in ("prio", "l1", "l2", "once", "later", "expiring")}
    opts = {"prio": StepOptions(priority=3), "l1": StepOptions(lane="L", serial=True),
            "l2": StepOptions(lane="L", serial=True),
            "once": StepOptions(max_attempts=1, timeout_ms=1234),
            "later": StepOptions(delay_ms=150), "expiring": StepOptions()}
    pid = generate("JOB")
    assert await q.flows.admit_tree(FlowSpec(qname, pid, b"p", tuple(
        FlowSpec(qname, ids[n], n.encode(), options=opts[n],
                 expires_ms=600_000 if n == "expiring" else None) for n in ids), "ignore"))
    rows = {n: await _row(q, i) for n, i in ids.items()}
    assert rows["prio"]["prio"] == b"3"
    assert (rows["l1"]["lane"], rows["l1"]["serial"]) == (b"L", b"1")
    assert (rows["once"]["max"], rows["once"]["timeout"]) == (b"1", b"1234")
    assert (rows["later"]["state"], rows["later"]["delay"]) == (b"delayed", b"150")
    assert "exp" in rows["expiring"] and "lane" not in rows["expiring"]
    got = await q.claim(10, lease_ms=60_000)
    order = [x.id for x in got]
    assert order[0] == ids["prio"]  # priority 3 before the plain job admitted earlier
    assert ids["l1"] in order and ids["l2"] not in order  # the serial lane holds one
    assert ids["later"] not in order  # delayed
    assert {ids["once"], ids["expiring"], plain} <= set(order)
    once = next(x for x in got if x.id == ids["once"])
    assert once.timeout_ms == 1234
    assert (await q.retry(once, delay_ms=0, error="x")) is RetryOutcome.DEAD  # its own limit
    await _promoted(q, ids["later"])
    assert [x.id for x in await q.claim(10, lease_ms=60_000)] == [ids["later"]]


@pytest.mark.parametrize("same_slot", [True, False])
async def test_a_parents_options_apply_when_it_is_released(conn: Any, qname: str,
                                                          same_slot: bool) -> None:
    q = AsyncQueue(conn, qname, options=QueueOptions(max_attempts=5))
    kids = q if same_slot else AsyncQueue(conn, other_slot(qname))
    pid, child, plain = generate("JOB"), generate("JOB"), generate("JOB")
    options = StepOptions(priority=2, lane="P", max_attempts=1, timeout_ms=4321)
    assert await q.flows.admit_tree(FlowSpec(qname, pid, b"p", (FlowSpec(kids.name, child, b"c"),),
                                             options=options))
    row = await _row(q, pid)
    assert (row["state"], row["prio"], row["lane"], row["max"]) == (b"waiting", b"2", b"P", b"1")
    (lease,) = await kids.claim(1, lease_ms=60_000)
    await kids.complete(lease, b"r")
    if not same_slot:
        assert (await kids.flows.relay(kids.name)).released == 1
    assert (await _row(q, pid))["state"] == b"delayed"  # due now: promote files it on its lane
    await q.enqueue(plain, b"x")
    await _promoted(q, pid)
    got = await q.claim(1, lease_ms=60_000)
    assert [x.id for x in got] == [pid]  # its priority: before the plain job
    assert (got[0].lane, got[0].timeout_ms) == ("P", 4321)
    assert (await q.retry(got[0], delay_ms=0, error="x")) is RetryOutcome.DEAD  # its own limit


async def test_a_parents_delay_counts_from_its_release(conn: Any, qname: str) -> None:
    q = AsyncQueue(conn, qname)
    pid, child = generate("JOB"), generate("JOB")
    assert await q.flows.admit_tree(FlowSpec(qname, pid, b"p", (FlowSpec(qname, child, b"c"),),
                                             options=StepOptions(delay_ms=60_000)))
    (lease,) = await q.claim(1, lease_ms=60_000)
    before = await conn.server_time_ms()
    await q.complete(lease, b"r")
    assert (await _row(q, pid))["state"] == b"delayed"
    due = await conn.command("ZSCORE", q.k.delayed, pid)
    assert before + 60_000 <= float(due) <= await conn.server_time_ms() + 60_000
    assert await q.promote() == 0 and await q.claim(1, lease_ms=60_000) == []


async def test_bad_options_are_refused_before_any_write(conn: Any, qname: str) -> None:
    q = AsyncQueue(conn, qname)
    for bad in ({"priority": 4}, {"lane": "x" * 257}, {"delay_ms": -1}, {"max_attempts": 0},
                {"timeout_ms": 0}, {"serial": "yes"}):
        with pytest.raises(InvalidArgument):
            StepOptions(**bad)
    pid, child = generate("JOB"), generate("JOB")
    with pytest.raises(InvalidArgument):  # a deadline no later than the delay
        await q.flows.admit_tree(FlowSpec(qname, pid, b"p", (
            FlowSpec(qname, child, b"c", options=StepOptions(delay_ms=500), expires_ms=500),)))
    with pytest.raises(InvalidArgument):
        await q.flows.admit_tree(FlowSpec(qname, pid, b"p", (
            FlowSpec(qname, child, b"c", options={"priority": 1}),)))  # type: ignore[arg-type]
    assert await q.job(pid) is None and await q.job(child) is None
    # the scripts check them too (include/options.lua, as admit's): a raw call is refused
    hold = f.flow_hold(q.k, child, b"c", f.member(pid, qname))
    admit = f.flow_admit(q.k, pid, b"p", policy="fail", children=[f.member(child, qname)])
    for call in (hold, admit):
        for at, bad in ((2, "x" * 1025), (3, "-1"), (4, "2"), (5, "0"), (6, "4"), (7, "0"),
                        (8, "t" * 33)):
            args = list(call.args)
            args[at] = bad
            with pytest.raises(InvalidArgument):
                await conn.run(Call(call.script, call.keys, args))
    assert await q.job(pid) is None and await q.job(child) is None


async def test_admit_flow_gives_each_child_and_the_parent_its_own_options(
        conn: Any, qname: str) -> None:
    """``admit_flow`` (the one-level door, not only ``admit_tree``): a child's options as a
    fourth element, in its own queue or another slot; the parent's as ``options``."""
    q = AsyncQueue(conn, qname, options=QueueOptions(max_attempts=5))
    far = AsyncQueue(conn, other_slot(qname))
    pid = generate("JOB")
    ids = {n: generate("JOB") for n in ("prio", "laned", "later", "plain")}
    assert await q.admit_flow(parent=(pid, b"p"), children=[
        (qname, ids["prio"], b"a", StepOptions(priority=2, timeout_ms=777)),
        (qname, ids["laned"], b"b", StepOptions(lane="L", serial=True, max_attempts=1)),
        (far.name, ids["later"], b"c", StepOptions(delay_ms=600_000)),
        (far.name, ids["plain"], b"d")], on_child_failure="ignore",
        options=StepOptions(lane="P", priority=1))
    rows = {n: await _row(far if n in ("later", "plain") else q, i) for n, i in ids.items()}
    assert (rows["prio"]["prio"], rows["prio"]["timeout"]) == (b"2", b"777")
    assert (rows["laned"]["lane"], rows["laned"]["serial"], rows["laned"]["max"]) == (b"L", b"1", b"1")
    assert (rows["later"]["state"], rows["later"]["delay"]) == (b"delayed", b"600000")
    assert rows["plain"]["state"] == b"pending" and "lane" not in rows["plain"]
    parent = await _row(q, pid)
    assert (parent["state"], parent["lane"], parent["prio"]) == (b"waiting", b"P", b"1")
    got = await q.claim(10, lease_ms=60_000)
    assert got[0].id == ids["prio"]  # its priority first
    assert {x.id: x.timeout_ms for x in got}[ids["prio"]] == 777
    assert [x.id for x in await far.claim(10, lease_ms=60_000)] == [ids["plain"]]  # later waits
    # a retry of the same flow, options and all, is a duplicate
    assert not await q.admit_flow(parent=(pid, b"p"), children=[
        (qname, ids["prio"], b"a", StepOptions(priority=2, timeout_ms=777)),
        (qname, ids["laned"], b"b", StepOptions(lane="L", serial=True, max_attempts=1)),
        (far.name, ids["later"], b"c", StepOptions(delay_ms=600_000)),
        (far.name, ids["plain"], b"d")], on_child_failure="ignore",
        options=StepOptions(lane="P", priority=1))


async def test_admit_flow_refuses_bad_child_options_before_any_write(conn: Any, qname: str) -> None:
    q = AsyncQueue(conn, qname)
    far = AsyncQueue(conn, other_slot(qname))
    pid, first, second = generate("JOB"), generate("JOB"), generate("JOB")
    for bad in ((far.name, second, b"c", {"priority": 1}),  # options that are no StepOptions
                (far.name, second, b"c", StepOptions(), "extra"), (far.name, second)):
        with pytest.raises(InvalidArgument):
            await q.admit_flow(parent=(pid, b"p"), children=[
                (qname, first, b"ok", StepOptions(priority=1)), bad])  # type: ignore[list-item]
    with pytest.raises(InvalidArgument):
        await q.admit_flow(parent=(pid, b"p"), children=[(qname, first, b"ok")],
                           options={"lane": "P"})  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):  # a deadline no later than the child's own delay
        await q.admit_flow(parent=(pid, b"p"), children=[
            (qname, first, b"ok", StepOptions(delay_ms=500))], expires_ms=500)
    for queue, job in ((q, pid), (q, first), (far, second)):
        assert await queue.job(job) is None  # the first child was not held either
