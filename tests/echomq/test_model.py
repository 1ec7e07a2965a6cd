"""The model-based test: random interleavings of every transition against a real server,
on the single server and on the local cluster, checked step by step against a pure
reference model (tests/echomq/model_ref.py; the machine is tests/echomq/model_machine.py).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

from echomq.servers.local_cluster import LocalCluster
from tests.conftest import cluster_url
from tests.echomq.model_flows import FlowMachine, FlowRef, Node
from tests.echomq.model_machine import GATE_REACH, REACH, QueueMachine
from tests.echomq.model_sharded import ShardedMachine

# Exploration runs in rounds of random examples until every REACH label has been reached,
# at most ROUNDS rounds: each label is a state the checks must have seen (a refused stale
# token, a settle of a completed job...), and with every step of the issue-14 features
# beside the others a single round of 60 examples missed one now and then (about 1 run in
# 3 on the sharded machine; a label reached 2-4 times a round, like "job's own timeout
# handed back" there, is still missed by a round now and then). More rounds explore more;
# every check and every label stays, and a run that reaches them all stops early. The labels
# a round missed now and then have steps that reach them by construction (impossible_deadline,
# late_reap, cancel_delayed, drain_then_park, complete_many_fresh, requeue_some_dead; history
# followed at once by its comparison): in trial rounds on both topologies the rarest label was
# reached 7-10 times, so one round is the rule and ROUNDS the bound.
ROUNDS = 5


def run_machine(url: str, cluster: bool, *, examples: int, steps: int, keep: bool = False,
                **extra: object) -> None:
    """Run the state machine (also used by scripts/mutation_check.py with its own settings);
    ``keep`` adds to the labels reached by an earlier round instead of starting afresh."""
    QueueMachine.url, QueueMachine.cluster = url, cluster
    if not keep:
        QueueMachine.reached.clear()
    machine = type("Run", (QueueMachine,), {})  # settings apply once per class: a fresh one
    run = settings(max_examples=examples, stateful_step_count=steps, deadline=None,
                   suppress_health_check=list(HealthCheck), **extra)(machine)  # type: ignore[arg-type]
    run.TestCase().runTest()


@pytest.mark.timeout(1800)
def test_protocol_matches_its_model(backend: str, backend_url: str) -> None:
    for r in range(ROUNDS):
        run_machine(backend_url, backend == "cluster", examples=60, steps=60, keep=r > 0)
        missed = REACH - {k for k, n in QueueMachine.reached.items() if n}
        if not missed:
            break
    assert not missed, f"{ROUNDS} rounds of 60 examples never reached: {sorted(missed)}"


@pytest.mark.cluster
@pytest.mark.timeout(1800)
def test_sharded_queue_matches_its_model_on_the_cluster(local_cluster: LocalCluster) -> None:
    """The same machine through ShardedQueue (3 shards, one per primary), one model per shard."""
    ShardedMachine.url, ShardedMachine.cluster = cluster_url(local_cluster), True
    QueueMachine.reached.clear()
    # A schedule admits into one single-slot queue; the single-queue machines cover it.
    unsharded = {"schedule ticks admitted", "schedule ticks below the mark refused",
                 "schedule tick not due refused"}
    for _ in range(ROUNDS):
        machine = type("ShardedRun", (ShardedMachine,), {})  # settings apply once per class
        run = settings(max_examples=40, stateful_step_count=60, deadline=None,
                       suppress_health_check=list(HealthCheck))(machine)  # type: ignore[arg-type]
        run.TestCase().runTest()
        missed = REACH - GATE_REACH - unsharded - {k for k, n in QueueMachine.reached.items() if n}
        if not missed:
            break
    assert not missed, f"{ROUNDS} rounds of 40 examples never reached: {sorted(missed)}"


FLOW_REACH = {"flow admitted", "released", "relay killed after settle", "flow cancelled",
              "repair started", "repair dropped", "stale ack", "cancelled while running",
              "nested flow admitted", "settled again", "flow admitted again after a child ran",
              "released by its child's script", "released by a failed inner parent's script"}


def run_flow_machine(url: str, cluster: bool, *, examples: int, steps: int, **extra: object) -> None:
    """Run the flow machine (tests/echomq/model_flows.py; also scripts/mutation_check.py)."""
    FlowMachine.url, FlowMachine.cluster = url, cluster
    machine = type("FlowRun", (FlowMachine,), {})
    run = settings(max_examples=examples, stateful_step_count=steps, deadline=None,
                   suppress_health_check=list(HealthCheck), **extra)(machine)  # type: ignore[arg-type]
    run.TestCase().runTest()


@pytest.mark.timeout(600)
def test_flows_match_their_model(backend: str, backend_url: str) -> None:
    """Flows on two queues in different slots (decision 0038): every parent released at
    most once, only when every child settled, whatever the interleaving of admissions cut
    short, relays killed between settle and ack, repairs, cancels and failures."""
    FlowMachine.reached.clear()
    for _ in range(3):  # rounds until every label is reached (one is the rule)
        run_flow_machine(backend_url, backend == "cluster", examples=15, steps=30)
        missed = FLOW_REACH - FlowMachine.reached
        if not missed:
            break
    assert not missed, missed


def test_the_flow_reference_counts_a_release_made_inside_a_nested_settle() -> None:
    """The flow machine's reference itself, no server: a leaf's end fails its inner parent,
    the root's last child, all in one queue, so the root is released in the leaf's script,
    once, and counted as such (the count was lost: ``direct += settle(...)`` read ``direct``
    before the nested settle added the release; the machine's bookkeeping check then failed
    about one run in twenty though the server was right)."""
    ref = FlowRef()
    root, inner, leaf, side = (("q", name) for name in ("root", "inner", "leaf", "side"))
    ref.nodes[root] = Node("waiting", kids={inner: "", side: ""}, policy="continue")
    ref.nodes[inner] = Node("waiting", parent=root, kids={leaf: ""}, policy="fail")
    ref.nodes[leaf] = Node("active", parent=inner)
    ref.nodes[side] = Node("active", parent=root)
    ref.ended(side, "done")
    assert (ref.nodes[root].state, ref.direct) == ("waiting", 0)
    ref.ended(leaf, "dead")
    assert ref.nodes[inner].state == "dead"
    assert (ref.nodes[root].state, ref.nodes[root].released, ref.nodes[root].failed) == ("pending", 1, 1)
    assert ref.direct == 1
