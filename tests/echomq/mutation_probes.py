"""Targeted probes: each drives one fenced or threshold case of the Lua directly, so the
mutant that removes it is killed on every run, not only when random model steps happen
to reach it (issue 29 item 6). ``tests/echomq/test_mutation_probes.py`` runs them on the
server and the 3+3 cluster; ``scripts/mutation_check.py`` runs a mutant's probes (its
``probes``) in every run, besides the model test.

Each probe is ``async def probe(conn, name)``: a connector and a queue name no one else
uses; it raises AssertionError when the server does not keep the guarantee.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from echomq import AsyncQueue, AsyncShardedQueue, QueueOptions, RateLimit, Verdict, generate
from echomq.core.model import Completion, ProgressOutcome, RetryOutcome
from echomq.protocol import calls, decode_leases
from echomq.protocol.flows import FlowSpec, StepOptions, flow_child, flow_parent, flow_start, member
from echomq.protocol.reservations import decode_reservation, reserve
from echomq.protocol.resharding import import_row
from echomq.protocol.schedules import Schedule, decode_schedule
from tests.echomq.mutation_probes_bare import BARE_PROBES
from tests.echomq.mutation_probes_beat import BEAT_PROBES

Probe = Callable[[Any, str], Awaitable[None]]


async def reap_applies_the_jobs_own_limit(conn: Any, name: str) -> None:
    """A job admitted with max_attempts=1 whose lease expired is dead after one reap,
    though the consumer's default allows five attempts."""
    q = AsyncQueue(conn, name, options=QueueOptions(max_attempts=5))
    jid = generate("JOB")
    await q.admit(jid, b"x", max_attempts=1)
    assert [lease.id for lease in await q.claim(1, lease_ms=1)] == [jid]
    give_up = time.monotonic() + 10
    while not sum(await q.reap()):  # the 1 ms lease expires on the server's clock
        assert time.monotonic() < give_up, "the lease never expired"
    row = await q.job(jid)
    assert row is not None and row["state"] == b"dead", row


async def lane_rate_limit_holds(conn: Any, name: str) -> None:
    """Under a lane limit of 1 lease a minute, a claim of 3 leases one job per lane."""
    q = AsyncQueue(conn, name)
    await q.set_limits(lane_rate=RateLimit(1, 60_000))
    for lane in ("a", "a", "b"):
        await q.admit(generate("JOB"), b"x", lane=lane)
    got = await q.claim(3, lease_ms=60_000)
    assert len(got) == 2, got
    assert (await q.stats()).pending == 1


async def flow_notice_counts_once(conn: Any, name: str) -> None:
    """A child's outcome counts once, whichever path brings it: a same-slot child settles
    its parent in complete's own script and a repeat of its notice changes nothing; a child
    of another queue's notice delivered twice (the relay died between settle and ack) counts
    once. The parent of three children waits for the third."""
    q, o = AsyncQueue(conn, name), AsyncQueue(conn, name + "-o")
    pid, c1, c2, c3 = generate("JOB"), generate("JOB"), generate("JOB"), generate("JOB")
    await q.admit_flow(parent=(pid, b"p"), children=[(name, c1, b"1"), (name, c2, b"2"),
                                                     (o.name, c3, b"3")])
    leases = {lease.id: lease for lease in await q.claim(2, lease_ms=60_000)}
    assert set(leases) == {c1, c2}
    await q.complete(leases[c1], b"")  # settled here: the same slot
    assert await conn.run(flow_parent(q.k, "settle", pid, member(c1, name), "done")) == 0
    (far,) = await o.claim(1, lease_ms=60_000)
    await o.complete(far, b"")
    settle = flow_parent(q.k, "settle", pid, member(c3, o.name), "done")
    assert await conn.run(settle) == 1
    assert await conn.run(settle) == 0  # the repeat changes nothing
    row = await q.job(pid)
    assert row is not None and row["state"] == b"waiting" and row["settled"] == b"2", row


async def flow_same_slot_release_waits_for_the_last_child(conn: Any, name: str) -> None:
    """Three children in the parent's queue, ended by complete, complete_batch and retry
    (policy continue): the parent waits until the script of the third releases it, once;
    a repeated settle, a cancel of the released parent's flow and a late notice change
    nothing (released stays 1, one pending entry)."""
    q = AsyncQueue(conn, name, options=QueueOptions(max_attempts=1))
    pid, kids = generate("JOB"), [generate("JOB") for _ in range(3)]
    await q.admit_flow(parent=(pid, b"p"), children=[(name, c, b"k") for c in kids],
                       on_child_failure="continue")
    leases = {lease.id: lease for lease in await q.claim(3, lease_ms=60_000)}
    await q.complete(leases[kids[0]], b"")
    await q.complete_many([leases[kids[1]]])
    row = await q.job(pid)
    assert row is not None and (row["state"], row["settled"]) == (b"waiting", b"2"), row
    await q.retry(leases[kids[2]], delay_ms=0, error="last")  # dead: the third ends
    row = await q.job(pid)
    assert row is not None and (row["state"], row["released"], row["failed"]) == (
        b"pending", b"1", b"1"), row
    for c in kids:
        assert await conn.run(flow_parent(q.k, "settle", pid, member(c, name), "done")) == 0
    assert await conn.run(flow_parent(q.k, "cancel", pid)) == 0  # it no longer waits
    row = await q.job(pid)
    assert row is not None and (row["state"], row["released"]) == (b"pending", b"1"), row
    assert [x.id for x in await q.claim(5, lease_ms=60_000)] == [pid]


async def flow_same_slot_child_of_a_cancelled_flow_changes_nothing(conn: Any, name: str) -> None:
    """A running same-slot child whose flow was cancelled completes: its parent, cancelled,
    is neither settled nor released by the child's script."""
    q = AsyncQueue(conn, name)
    pid, child = generate("JOB"), generate("JOB")
    await q.admit_flow(parent=(pid, b"p"), children=[(name, child, b"k")])
    (lease,) = await q.claim(1, lease_ms=60_000)
    assert await q.cancel_flow(pid)
    await q.complete(lease, b"")
    (node,) = await q.children(pid)
    assert (node.id, node.outcome) == (child, "")  # its field stays unsettled
    row = await q.job(pid)
    assert row is not None and row["state"] == b"cancelled" and "released" not in row, row
    assert row["settled"] == b"0", row
    assert (await q.stats()).pending == 0


async def flow_ack_keeps_a_newer_notice(conn: Any, name: str) -> None:
    """An ack carrying a notice other than the one stored (the child's notice was replaced
    after the relay read it) deletes nothing: the stored notice waits for its own delivery."""
    q, o = AsyncQueue(conn, name), AsyncQueue(conn, name + "-o")
    pid, child = generate("JOB"), generate("JOB")
    await q.admit_flow(parent=(pid, b"p"), children=[(o.name, child, b"c")])
    (lease,) = await o.claim(1, lease_ms=60_000)
    await o.complete(lease, b"")
    note = f"done:{pid}:{name}"
    assert await conn.run(flow_child(o.k, "ack", child, f"dead:{pid}:{name}")) == 0
    assert await conn.command("HGET", o.k.finished, child) == note.encode()
    assert await conn.run(flow_child(o.k, "ack", child, note)) == 1


async def flow_start_leaves_a_finished_child(conn: Any, name: str) -> None:
    """The producer's last step run again after its child finished (a retry, or the
    repair) leaves the child done: it does not run twice."""
    q = AsyncQueue(conn, name)
    pid, child = generate("JOB"), generate("JOB")
    await q.admit_flow(parent=(pid, b"p"), children=[(name, child, b"k")])
    (lease,) = await q.claim(1, lease_ms=60_000)
    assert lease.id == child
    await q.complete(lease, b"")
    assert await conn.run(flow_start(q.k, child)) == 0
    row = await q.job(child)
    assert row is not None and row["state"] == b"done", row
    # nothing runs again: only the parent, released by the child's completion (same slot)
    assert [x.id for x in await q.claim(5, lease_ms=60_000)] == [pid]


async def batch_plain_job_is_tagged_on_vtime(conn: Any, name: str) -> None:
    """After 1,001 laned jobs were claimed (vtime 1,001), a level-1 job admitted before a
    batch of plain jobs is claimed before them (its tag 1,002 - 1,000 < vtime): a batch's
    plain job scored 0 would go first."""
    q = AsyncQueue(conn, name)
    history = [(generate("JOB"), b"h", "h") for _ in range(1001)]
    assert await q.admit_many(history) == [Verdict.ENQUEUED] * 1001
    assert len(await q.claim(1001, lease_ms=60_000)) == 1001
    urgent = generate("JOB")
    await q.admit(urgent, b"u", priority=1)
    assert await q.enqueue_many([(generate("JOB"), b"p") for _ in range(2)]) == \
        [Verdict.ENQUEUED] * 2
    (first,) = await q.claim(1, lease_ms=60_000)
    assert first.id == urgent


async def _split(conn: Any, name: str, lane: str, window_ms: int = 10_000) -> tuple[
        AsyncShardedQueue, str, AsyncQueue, AsyncQueue]:
    """A 3-shard queue and an id whose lane's shard is not its home: (queue, id, home, target)."""
    q = AsyncShardedQueue(conn, name, shards=3, reserve_window_ms=window_ms)
    await q.open()
    jid = next(j for j in (generate("JOB") for _ in range(100))
               if q.layout.index(j, lane) != q.layout.index(j))
    return q, jid, q.shards[q.layout.index(jid)], q.shards[q.layout.index(jid, lane)]


async def reserve_resend_completes(conn: Any, name: str) -> None:
    """A resend whose first send reserved (its reply lost) finds its own reservation."""
    q, jid, home, target = await _split(conn, name, "l")
    assert decode_reservation(await conn.run(reserve(home.k, jid, target.name))).verdict == "reserved"
    assert await q.admit(jid, b"x", lane="l") is Verdict.ENQUEUED
    assert (await q.stats()).pending == 1


async def reserve_young_is_respected(conn: Any, name: str) -> None:
    """A reservation younger than the window is its admission's: others are DUPLICATE."""
    q, jid, home, target = await _split(conn, name, "l")
    await conn.run(reserve(home.k, jid, target.name))
    assert await q.admit(jid, b"x") is Verdict.DUPLICATE
    third = next(f"lane-{i}" for i in range(100) if q.shard_for(jid, f"lane-{i}") not in
                 (home, target))
    assert await q.admit(jid, b"x", lane=third) is Verdict.DUPLICATE
    assert (await q.stats()).pending == 0


async def reserve_stale_is_repaired(conn: Any, name: str) -> None:
    """A reservation whose producer died (window 0: stale at once) is taken over by the
    next admission; the dead producer's late second step meets the void."""
    q, jid, home, target = await _split(conn, name, "l", window_ms=0)
    await conn.run(reserve(home.k, jid, target.name))
    assert await q.admit(jid, b"x") is Verdict.ENQUEUED
    assert await target.admit(jid, b"late", lane="l") is Verdict.DUPLICATE
    assert (await q.stats()).pending == 1


async def reserve_takeover_is_fenced(conn: Any, name: str) -> None:
    """Two repairers read the same stale reservation: the second one's takeover, fenced on
    the owner and time it read, changes nothing once the first replaced it."""
    _, jid, home, _ = await _split(conn, name, "l")
    first = decode_reservation(await conn.run(reserve(home.k, jid, "s1")))
    won = decode_reservation(await conn.run(reserve(home.k, jid, "s2", owner="s1", at=first.at)))
    assert won.verdict == "reserved" and won.shard == "s2"
    lost = decode_reservation(await conn.run(reserve(home.k, jid, "", owner="s1", at=first.at)))
    assert lost.verdict in {"held", "stale"} and lost.shard == "s2", lost
    lost = decode_reservation(await conn.run(reserve(home.k, jid, "s3", owner="s1", at=first.at)))
    assert lost.shard == "s2", lost


async def _past(conn: Any, deadline_ms: int) -> None:
    """Until the server's clock is past ``deadline_ms`` (a 1 ms lease runs out at once)."""
    give_up = time.monotonic() + 10
    while await conn.server_time_ms() <= deadline_ms:
        assert time.monotonic() < give_up, "the server's clock never passed the deadline"


async def expired_lease_is_refused(conn: Any, name: str) -> None:
    """A lease past its deadline and not yet reaped holds nothing: heartbeat (alone and in a
    batch), progress, retry and complete each refuse it, and the job stays active with no
    result or failure."""
    q = AsyncQueue(conn, name)
    jid = generate("JOB")
    await q.admit(jid, b"x")
    (lease,) = await q.claim(1, lease_ms=1)
    await _past(conn, lease.deadline_ms)
    assert await q.heartbeat(lease, lease_ms=60_000) is None
    assert await q.heartbeat_many([lease], lease_ms=60_000) == [None]
    assert await q.report_progress(lease, b"half") is ProgressOutcome.STALE
    assert await q.retry(lease, delay_ms=0, error="boom") is RetryOutcome.STALE
    assert await q.complete(lease, b"done") is Completion.STALE
    row = await q.job(jid)
    assert row is not None and row["state"] == b"active", row


async def retry_applies_the_jobs_own_limit(conn: Any, name: str) -> None:
    """A job admitted with max_attempts=1 is dead at its first failed attempt, though the
    queue's default allows five."""
    q = AsyncQueue(conn, name, options=QueueOptions(max_attempts=5))
    jid = generate("JOB")
    await q.admit(jid, b"x", max_attempts=1)
    (lease,) = await q.claim(1, lease_ms=60_000)
    assert await q.retry(lease, delay_ms=0, error="boom") is RetryOutcome.DEAD


async def queue_rate_limit_is_exact(conn: Any, name: str) -> None:
    """Under a queue limit of 2 leases a minute, a claim of 3 on a fresh queue leases 2."""
    q = AsyncQueue(conn, name)
    await q.set_limits(rate=RateLimit(2, 60_000))
    for _ in range(3):
        await q.admit(generate("JOB"), b"x")
    assert len(await q.claim(3, lease_ms=60_000)) == 2
    assert (await q.stats()).pending == 1


async def claim_leases_only_pending_jobs(conn: Any, name: str) -> None:
    """A claim handed the id of a job that is leased, or done, leases nothing: only a
    pending job is leased (the candidates come from a peek that may be stale)."""
    q = AsyncQueue(conn, name)
    jid = generate("JOB")
    await q.admit(jid, b"x")
    [lease] = await q.claim(1, lease_ms=60_000)
    assert lease.id == jid
    again = decode_leases(name, await conn.run(calls.claim(q.k, [jid], count=1, lease_ms=60_000)))
    assert list(again) == [], again  # active: not leased twice
    assert await q.complete(lease, b"") is Completion.COMPLETED
    again = decode_leases(name, await conn.run(calls.claim(q.k, [jid], count=1, lease_ms=60_000)))
    assert list(again) == [], again  # done: never run again
    row = await q.job(jid)
    assert row is not None and row["state"] == b"done" and row["attempts"] == b"1", row


async def _plain_then(conn: Any, name: str) -> tuple[AsyncQueue, str]:
    """A queue made by a plain admission (its meta records 'plain': the claim reads no lane,
    priority or timeout field), and that first job's id."""
    q = AsyncQueue(conn, name)
    first = generate("JOB")
    assert await q.enqueue_many([(first, b"plain")]) == [Verdict.ENQUEUED]
    return q, first


async def _leased_options(q: AsyncQueue, jid: str) -> tuple[str | None, int | None]:
    leases = {lease.id: lease for lease in await q.claim(10, lease_ms=60_000)}
    assert jid in leases, leases
    return leases[jid].lane, leases[jid].timeout_ms


async def options_on_a_plain_queue_are_read(conn: Any, name: str) -> None:
    """A job admitted with a timeout into a queue of plain jobs is leased with it (its
    admission clears the queue's 'plain'; a timeout puts nothing in lanes, so only that
    clear tells the claim), as is a later job on a serial lane, which holds the next."""
    q, _ = await _plain_then(conn, name)
    t, a, b = generate("JOB"), generate("JOB"), generate("JOB")
    await q.admit(t, b"t", timeout_ms=5_000)
    assert await _leased_options(q, t) == (None, 5_000)
    await q.admit(a, b"a", lane="s", serial=True, timeout_ms=5_000)
    await q.admit(b, b"b", lane="s", serial=True)
    assert await _leased_options(q, a) == ("s", 5_000)
    assert (await q.stats()).pending == 1  # b waits for its serial lane


async def flow_step_options_on_a_plain_queue_are_read(conn: Any, name: str) -> None:
    """A flow step with a timeout, admitted into a queue of plain jobs, is leased with it
    (include/steps.lua clears the queue's 'plain')."""
    q, _ = await _plain_then(conn, name)
    pid, cid = generate("JOB"), generate("JOB")
    child = FlowSpec(name, cid, b"c", options=StepOptions(timeout_ms=5_000))
    assert await q.flows.admit_tree(FlowSpec(name, pid, b"p", (child,), "ignore"))
    assert await _leased_options(q, cid) == (None, 5_000)


async def an_older_clients_lane_is_read(conn: Any, name: str) -> None:
    """A serial-lane job in a queue whose meta still says 'plain' (as an older client's
    admission leaves it: it does not know the flag) is leased with its lane, and holds it:
    while a job waits on a line, the claim reads every option."""
    q, _ = await _plain_then(conn, name)
    a, b = generate("JOB"), generate("JOB")
    await q.admit(a, b"a", lane="s", serial=True)
    await q.admit(b, b"b", lane="s", serial=True)
    await conn.command("HSET", q.k.meta, "plain", "1")  # what an older client leaves
    assert await _leased_options(q, a) == ("s", None)
    assert (await q.stats()).pending == 1  # b waits for its serial lane


async def scheduled_options_on_a_plain_queue_are_read(conn: Any, name: str) -> None:
    """A schedule's job with a timeout, admitted into a queue of plain jobs, is leased with
    it (the schedule script clears the queue's 'plain'; a timeout puts nothing in lanes)."""
    q, _ = await _plain_then(conn, name)
    sched = Schedule(name="probe", queue=name, every_ms=1_000, timeout_ms=5_000)
    tick = sched.latest(int(time.time() * 1000) - 5_000)
    got = decode_schedule(await conn.run(sched.call([tick], floor=tick - 1_000)))
    assert got.admitted == [sched.job_id(tick)], got
    assert await _leased_options(q, sched.job_id(tick)) == (None, 5_000)


async def imported_options_on_a_plain_queue_are_read(conn: Any, name: str) -> None:
    """A row with a timeout moved by a reshard into a shard of plain jobs is leased with it
    (import_row clears the shard's 'plain'; a timeout puts nothing in lanes)."""
    q, _ = await _plain_then(conn, name)
    jid = generate("JOB")
    row = {"state": b"pending", "attempts": b"0", "payload": b"x", "timeout": b"5000"}
    assert await conn.run(import_row(q.k, jid, "pending", 0, False, row)) == 1
    assert await _leased_options(q, jid) == (None, 5_000)


PROBES: dict[str, Probe] = {p.__name__: p for p in (
    expired_lease_is_refused, retry_applies_the_jobs_own_limit, queue_rate_limit_is_exact,
    reap_applies_the_jobs_own_limit, lane_rate_limit_holds, flow_notice_counts_once,
    flow_same_slot_release_waits_for_the_last_child,
    flow_same_slot_child_of_a_cancelled_flow_changes_nothing, flow_ack_keeps_a_newer_notice,
    flow_start_leaves_a_finished_child, batch_plain_job_is_tagged_on_vtime,
    reserve_resend_completes, reserve_young_is_respected, reserve_stale_is_repaired,
    reserve_takeover_is_fenced, claim_leases_only_pending_jobs, options_on_a_plain_queue_are_read,
    an_older_clients_lane_is_read, flow_step_options_on_a_plain_queue_are_read,
    scheduled_options_on_a_plain_queue_are_read, imported_options_on_a_plain_queue_are_read)}
PROBES.update(BARE_PROBES)  # the finish's meta 'bare' and 'plain' (decision 0050)
PROBES.update(BEAT_PROBES)  # a consumer's beat in one call (decision 0055)
