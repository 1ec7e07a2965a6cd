"""The model-based test: random interleavings of every transition against a real server,
on the single server and on the local cluster, checked step by step against a pure
reference model (tests/echomq/model_ref.py; the machine is tests/echomq/model_machine.py).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

from echomq.local_cluster import LocalCluster
from tests.conftest import cluster_url
from tests.echomq.model_machine import GATE_REACH, REACH, QueueMachine
from tests.echomq.model_sharded import ShardedMachine


def run_machine(url: str, cluster: bool, *, examples: int, steps: int, **extra: object) -> None:
    """Run the state machine (also used by scripts/mutation_check.py with its own settings)."""
    QueueMachine.url, QueueMachine.cluster = url, cluster
    QueueMachine.reached.clear()
    machine = type("Run", (QueueMachine,), {})  # settings apply once per class: a fresh one
    run = settings(max_examples=examples, stateful_step_count=steps, deadline=None,
                   suppress_health_check=list(HealthCheck), **extra)(machine)  # type: ignore[arg-type]
    run.TestCase().runTest()


@pytest.mark.timeout(900)
def test_protocol_matches_its_model(backend: str, backend_url: str) -> None:
    run_machine(backend_url, backend == "cluster", examples=60, steps=60)
    missed = REACH - {k for k, n in QueueMachine.reached.items() if n}
    assert not missed, f"the run never reached: {sorted(missed)}"


@pytest.mark.cluster
@pytest.mark.timeout(900)
def test_sharded_queue_matches_its_model_on_the_cluster(local_cluster: LocalCluster) -> None:
    """The same machine through ShardedQueue (3 shards, one per primary), one model per shard."""
    ShardedMachine.url, ShardedMachine.cluster = cluster_url(local_cluster), True
    QueueMachine.reached.clear()
    machine = type("ShardedRun", (ShardedMachine,), {})
    run = settings(max_examples=40, stateful_step_count=60, deadline=None,
                   suppress_health_check=list(HealthCheck))(machine)  # type: ignore[arg-type]
    run.TestCase().runTest()
    # A schedule admits into one single-slot queue; the single-queue machines cover it.
    unsharded = {"schedule ticks admitted", "schedule ticks below the mark refused",
                 "schedule tick not due refused"}
    missed = REACH - GATE_REACH - unsharded - {k for k, n in QueueMachine.reached.items() if n}
    assert not missed, f"the run never reached: {sorted(missed)}"
