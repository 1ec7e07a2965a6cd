# Generated from tests/echomq/_async/test_dead_jobs.py by scripts/unasync_gen.py. Do not edit.
"""Operator transitions on named jobs: requeue and purge of dead jobs, cancel of waiting
ones (what ``echomq requeue-dead|purge-dead|cancel`` and the dashboard's buttons run), on
both topologies and both APIs (written once for asyncio; the blocking copy is generated)."""

from __future__ import annotations

import pytest
import redis

from echomq import CancelOutcome, InvalidJobId, Queue, QueueOptions, generate
from tests.conftest import keys_of
from tests.echomq.invariants import assert_consistent


def _dead(queue: Queue, n: int) -> list[str]:
    q = Queue(queue.connector, queue.name, options=QueueOptions(max_attempts=1))
    ids = [generate("JOB") for _ in range(n)]
    for i in ids:
        q.enqueue(i, b"x")
    for lease in q.claim(n, lease_ms=60_000):
        q.retry(lease, delay_ms=0, error="E: boom")
    return ids


def test_requeue_moves_only_the_named_dead_jobs(queue: Queue, raw: redis.Redis) -> None:
    dead = _dead(queue, 3)
    assert queue.requeue([dead[0], dead[2]]) == 2
    assert (queue.stats()).dead == 1 and (queue.stats()).pending == 2
    row = queue.job(dead[0])
    assert row is not None and row["state"] == b"pending" and row["failures"] == b"0"
    assert queue.requeue([dead[0]]) == 0  # no longer dead: skipped, nothing changed
    assert assert_consistent(raw, queue.name) == {dead[0]: "pending", dead[1]: "dead", dead[2]: "pending"}


def test_purge_deletes_only_named_jobs_of_that_state(queue: Queue, raw: redis.Redis) -> None:
    dead = _dead(queue, 2)
    waiting = generate("JOB")
    queue.enqueue(waiting, b"y")
    assert queue.purge("dead", [dead[0], waiting]) == 1
    assert queue.job(dead[0]) is None and queue.job(waiting) is not None
    assert f"emq:{{{queue.name}}}:job:{dead[0]}" not in keys_of(raw, queue.name)
    with pytest.raises(ValueError, match="done, dead or expired"):
        queue.purge("pending", [waiting])
    assert assert_consistent(raw, queue.name) == {dead[1]: "dead", waiting: "pending"}


def test_cancel_ends_waiting_jobs_cancelled_and_frees_a_held_serial_lane(
        queue: Queue, raw: redis.Redis) -> None:
    first, second, later, running = (generate("JOB") for _ in range(4))
    queue.admit(first, b"1", lane="p1", serial=True)
    queue.admit(second, b"2", lane="p1", serial=True)
    queue.admit(later, b"3", delay_ms=3_600_000)
    queue.enqueue(running, b"4")
    leases = {x.id: x for x in queue.claim(3, lease_ms=60_000)}
    assert set(leases) == {running, first}  # second waits behind its serial lane
    # first fails and comes back to pending still holding its serial lane
    queue.retry(leases[first], delay_ms=0, error="E: again")
    assert queue.cancel([first, later, running]) == [
        CancelOutcome.CANCELLED, CancelOutcome.CANCELLED, CancelOutcome.ASKED]
    for jid in (first, later):  # kept as cancelled rows in the done set, payload dropped
        row = queue.job(jid) or {}
        assert row["state"] == b"cancelled" and b"payload" not in row
    assert (queue.job(running) or {})["state"] == b"active"  # asked to stop, still running
    assert assert_consistent(raw, queue.name) == {running: "active", second: "pending",
                                                  first: "done", later: "done"}
    # the lane is free: its next job can be claimed
    claimed = [x.id for x in queue.claim(5, lease_ms=60_000)]
    assert second in claimed


def test_named_actions_refuse_bad_ids_before_any_io(queue: Queue) -> None:
    with pytest.raises(InvalidJobId):
        queue.requeue(["not-an-id"])
    with pytest.raises(ValueError, match="job ids"):
        queue.cancel([])
    with pytest.raises(ValueError, match="job ids"):
        queue.cancel([generate("JOB") for _ in range(queue.options.batch + 1)])
