"""A workflow's steps take their tasks' options (decision 0041; issue 27): lane and serial,
priority, max_attempts, timeout_ms, delay_ms, and a deadline (expires_ms) for a step that
starts at admission, in a chain, a chord's group and body, and a batch. Driven by hand
(claims and completions, no worker), so each option is seen taking effect; on one server
and on the 3+3 cluster, with steps in queues on different slots."""

from __future__ import annotations

from typing import Any

from echomq import App, AsyncQueue, QueueOptions, RetryOutcome, chain, chord, generate, group
from tests.echomq.test_flows import other_slot


def _app(conn: Any, qname: str) -> tuple[App, Any]:
    app = App(connector=conn, queue=qname, queue_options=QueueOptions(max_attempts=5))
    far = other_slot(qname)

    @app.task(priority=3, max_attempts=1, timeout_ms=1500, expires_ms=600_000)
    async def first(x: int) -> int:
        return x

    @app.task(lane="region", serial=True)
    async def middle(x: int, region: str) -> int:
        return x

    @app.task(delay_ms=60_000, expires_ms=600_000)  # a waiting step: its deadline cannot apply
    async def last(x: Any) -> int:
        return 0

    @app.task(queue=far, lane="region", serial=True, max_attempts=1, timeout_ms=2500)
    async def member(x: int, region: str) -> int:
        return x

    return app, (first, middle, last, member)


async def _promoted(q: AsyncQueue, job_id: str) -> None:
    for _ in range(100_000):
        await q.promote()
        if ((await q.job(job_id)) or {}).get("state") == b"pending":
            return
    raise AssertionError(f"{job_id} never became pending")


async def test_a_chains_steps_take_their_tasks_options(conn: Any, qname: str) -> None:
    app, (first, middle, last, _) = _app(conn, qname)
    q = app.queue(qname)
    await q.enqueue(plain := generate("JOB"), b"x")  # a plain job waiting first
    handle = await app.admit(chain(first.s(1), middle.s("eu"), last.s()))
    (mid_node,) = await q.children(handle.id)
    (first_node,) = await q.children(mid_node.id)
    rows = {n: await q.job(i) or {} for n, i in (("first", first_node.id), ("mid", mid_node.id),
                                                  ("last", handle.id))}
    assert (rows["first"]["prio"], rows["first"]["max"], rows["first"]["timeout"]) == (
        b"3", b"1", b"1500")
    assert "exp" in rows["first"] and "exp" not in rows["last"]  # only a step that starts now
    assert (rows["mid"]["lane"], rows["mid"]["serial"], rows["last"]["delay"]) == (
        b"eu", b"1", b"60000")
    got = await q.claim(1, lease_ms=60_000)  # priority 3: before the plain job
    assert [x.id for x in got] == [first_node.id] and got[0].timeout_ms == 1500
    await q.complete(got[0], b"")
    await q.complete((await q.claim(1, lease_ms=60_000))[0], b"")  # the plain job
    await _promoted(q, mid_node.id)  # released, then filed on its lane by promote
    (lease,) = await q.claim(5, lease_ms=60_000)
    assert (lease.id, lease.lane) == (mid_node.id, "eu")
    before = await conn.server_time_ms()
    await q.complete(lease, b"")
    assert (await q.job(handle.id) or {})["state"] == b"delayed"  # its delay, from its release
    assert float(await conn.command("ZSCORE", q.k.delayed, handle.id)) >= before + 60_000
    assert await q.claim(5, lease_ms=60_000) == [] and plain


async def test_a_chords_group_and_body_and_a_batch_take_their_tasks_options(
        conn: Any, qname: str) -> None:
    app, (first, _, last, member) = _app(conn, qname)
    far = app.queue(member.queue)
    handle = await app.admit(chord(group(member.s(1, "eu"), member.s(2, "eu")), last.s()))
    kids = [n.id for n in await app.queue(qname).children(handle.id)]
    got = await far.claim(5, lease_ms=60_000)
    assert len(got) == 1 and got[0].id in kids  # one serial lane: one member at a time
    assert (got[0].lane, got[0].timeout_ms) == ("eu", 2500)
    assert await far.retry(got[0], delay_ms=0, error="x") is RetryOutcome.DEAD  # max_attempts 1
    assert (await far.flows.relay(far.name)).failed == 1  # another slot: through the relay
    body = await app.queue(qname).job(handle.id) or {}
    assert body["delay"] == b"60000" and body["state"] == b"dead"  # policy fail: the body died
    batch = await app.batch([first.s(7), member.s(3, "us")])
    jobs = {n.queue: n.id for n in await app.queue(batch.queue.name).children(batch.id)}
    one = await app.queue(qname).job(jobs[qname]) or {}
    two = await far.job(jobs[far.name]) or {}
    assert (one["prio"], one["max"], "exp" in one) == (b"3", b"1", True)
    assert (two["lane"], two["serial"], two["timeout"]) == (b"us", b"1", b"2500")
