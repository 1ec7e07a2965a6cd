"""Nested flows (a chain's steps, a chord in a chain: decision 0041), on one server and on
the 3+3 cluster: a tree is admitted leaves held, inner parents waiting, root last; each
level is released exactly once after the level below; a crash before the root is undone
by the repair walking up to the missing root, a crash after it is finished."""

from __future__ import annotations

import pytest

from echomq import AsyncQueue, generate
from echomq.client._async.flows import FlowAbandoned, FlowSpec
from echomq.protocol import flows as f
from tests.echomq.test_flows import _finish_all, _state, other_slot


def _tree(queue: AsyncQueue, other: AsyncQueue) -> FlowSpec:
    """root (queue) <- inner (other slot) <- leaf (queue) and a second leaf (other)."""
    leaf = FlowSpec(queue.name, generate("JOB"), b"leaf")
    inner = FlowSpec(other.name, generate("JOB"), b"inner", (leaf,))
    return FlowSpec(queue.name, generate("JOB"), b"root",
                    (inner, FlowSpec(other.name, generate("JOB"), b"leaf2")))


async def test_each_level_of_a_tree_is_released_once_after_the_level_below(
        queue: AsyncQueue) -> None:
    other = AsyncQueue(queue.connector, other_slot(queue.name))
    root = _tree(queue, other)
    inner, leaf2 = root.children
    assert await queue.flows.admit_tree(root)
    assert not await queue.flows.admit_tree(root)  # a retry: a duplicate, nothing changes
    assert await _state(other, inner.id) == "waiting" and await _state(queue, root.id) == "waiting"
    assert await _finish_all(queue, 5) == [inner.children[0].id]  # only the leaf is runnable
    assert (await queue.flows.relay(queue.name)).released == 1
    assert await _finish_all(other, 5) in ([inner.id, leaf2.id], [leaf2.id, inner.id])
    assert (await other.flows.relay(other.name)).released == 1
    assert await _finish_all(queue, 5) == [root.id]
    row = await queue.job(root.id)
    assert row is not None and row["released"] == b"1"
    inner_row = await other.job(inner.id)
    assert inner_row is not None and inner_row["released"] == b"1"


async def test_a_crash_before_the_root_is_undone_by_the_repair_walking_up(queue: AsyncQueue) -> None:
    other = AsyncQueue(queue.connector, other_slot(queue.name))
    root = _tree(queue, other)
    inner = root.children[0]
    leaf = inner.children[0]
    c = queue.connector
    # the admission got as far as the leaf and the inner parent, then its process died
    assert await c.run(f.flow_hold(queue.k, leaf.id, b"leaf", f.member(inner.id, other.name))) == 1
    assert await c.run(f.flow_admit(other.k, inner.id, b"inner", policy="fail",
                                    children=[f.member(leaf.id, queue.name)],
                                    parent=f.member(root.id, queue.name))) == 1
    assert await queue.flows.repair(queue.name, older_than_ms=0) == (0, 1)
    assert await queue.job(leaf.id) is None
    assert await _state(other, inner.id) == "cancelled"  # never runs: its flow never committed
    assert await _state(queue, root.id) == "cancelled"  # the tombstone
    with pytest.raises(FlowAbandoned):
        await queue.flows.admit_tree(root)
    assert await queue.claim(5, lease_ms=60_000) == [] and await other.claim(5, lease_ms=60_000) == []


async def test_a_crash_after_the_root_is_finished_and_cancel_reaches_every_level(
        queue: AsyncQueue) -> None:
    other = AsyncQueue(queue.connector, other_slot(queue.name))
    root = _tree(queue, other)
    inner = root.children[0]
    leaf = inner.children[0]
    c = queue.connector
    assert await c.run(f.flow_hold(queue.k, leaf.id, b"leaf", f.member(inner.id, other.name))) == 1
    assert await c.run(f.flow_admit(other.k, inner.id, b"inner", policy="fail",
                                    children=[f.member(leaf.id, queue.name)],
                                    parent=f.member(root.id, queue.name))) == 1
    assert await c.run(f.flow_admit(queue.k, root.id, b"root", policy="fail",
                                    children=[f.member(inner.id, other.name)])) == 1
    assert await queue.flows.repair(queue.name, older_than_ms=0) == (1, 0)  # started
    assert await _state(queue, leaf.id) == "pending"
    assert await queue.cancel_flow(root.id)
    assert {await _state(queue, root.id), await _state(other, inner.id),
            await _state(queue, leaf.id)} == {"cancelled"}
