"""A real local Valkey Cluster: it comes up healthy, survives kill -9 and manual failover,
and leaves no process behind."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
import redis
from redis.cluster import ClusterNode as RedisClusterNode
from redis.cluster import RedisCluster

from echomq.core.errors import InvalidArgument
from echomq.protocol.keyspace import slot
from echomq.servers.local_cluster import SLOTS, ClusterNode, LocalCluster
from tests.procfs import alive

pytestmark = pytest.mark.cluster

T = TypeVar("T")
KEY = "emq:{lc-test}:probe"


@pytest.fixture
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(primaries=3, replicas_per_primary=1, node_timeout_ms=2000) as c:
        yield c


@pytest.fixture
def client(cluster: LocalCluster) -> Iterator[RedisCluster]:
    rc = RedisCluster(
        startup_nodes=[RedisClusterNode(h, p) for h, p in cluster.startup_nodes],
        decode_responses=True, socket_timeout=1.0, socket_connect_timeout=1.0,
    )
    try:
        yield rc
    finally:
        rc.close()


def retry(fn: Callable[[], T], budget: float = 15.0) -> T:
    """Retry through the transient errors of a failover, as an application must."""
    deadline = time.monotonic() + budget
    while True:
        try:
            return fn()
        except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def wait_role(node: ClusterNode, role: str, timeout: float) -> float:
    t0 = time.monotonic()
    while node.role != role:
        assert time.monotonic() - t0 < timeout, f"{node} still {node.role} after {timeout}s"
        time.sleep(0.02)
    return time.monotonic() - t0


def test_comes_up_healthy_with_all_slots(cluster: LocalCluster, client: RedisCluster) -> None:
    assert len(cluster.nodes) == 6
    assert all(n.host == "127.0.0.1" for n in cluster.nodes)
    assert sorted(n.role for n in cluster.nodes) == ["primary"] * 3 + ["replica"] * 3
    assert len({n.node_id for n in cluster.nodes}) == 6
    assert len({n.pid for n in cluster.nodes}) == 6
    assert cluster.url == f"redis://127.0.0.1:{cluster.nodes[0].port}"
    assert cluster.startup_seconds > 0  # how long it took: bench/cluster_timings.py

    # The client's own view: 3 primaries, 3 replicas, every slot served.
    assert len(client.get_primaries()) == 3
    assert len(client.get_replicas()) == 3
    slots = client.nodes_manager.slots_cache
    assert sorted(slots) == list(range(SLOTS))
    assert all(len(slots[s]) == 2 for s in range(SLOTS))  # a primary and its replica
    for node in cluster.nodes:
        assert "cluster_state:ok" in node.command("CLUSTER", "INFO").decode()

    # Each primary has its own replica, and the helpers agree with the client.
    primaries = {n.port for n in cluster.nodes if n.role == "primary"}
    replicas_of = {cluster.replica_of(p).port for p in cluster.nodes if p.port in primaries}
    assert len(replicas_of) == 3
    assert not replicas_of & primaries
    for key in (KEY, "a", "b", "emq:{q}:job:1"):
        assert client.set(key, "v")
        owner = client.get_node_from_key(key)
        assert owner is not None
        assert cluster.primary_for_key(key).port == owner.port
        assert cluster.primary_for_slot(slot(key)).port == owner.port
    cluster.wait_healthy(5)  # raises unless every node agrees the cluster is ok within 5 s


def test_kill_primary_promotes_its_replica(cluster: LocalCluster, client: RedisCluster) -> None:
    primary = cluster.primary_for_key(KEY)
    replica = cluster.replica_of(primary)
    assert client.set(KEY, "before")
    node = client.get_node_from_key(KEY)
    assert node is not None
    assert client.execute_command("WAIT", 1, 2000, target_nodes=node) == 1

    t0 = time.monotonic()
    cluster.kill_node(primary)
    assert primary.pid is None
    assert primary.role == "down"
    promoted = wait_role(replica, "primary", timeout=30.0)  # the time: bench/cluster_timings.py
    cluster.wait_healthy(15)
    print(f"promotion after kill -9: {promoted:.2f}s; healthy after {time.monotonic() - t0:.2f}s")
    assert cluster.primary_for_key(KEY) is replica

    # The acknowledged write survived, and the client follows the new primary.
    assert retry(lambda: client.get(KEY)) == "before"
    assert retry(lambda: client.set(KEY, "after"))

    # The old primary comes back as a replica of the promoted node.
    cluster.restart_node(primary)
    cluster.wait_healthy(30)
    assert primary.role == "replica"
    assert cluster.replica_of(replica) is primary


def test_manual_failover_swaps_roles(cluster: LocalCluster, client: RedisCluster) -> None:
    primary = cluster.primary_for_key(KEY)
    replica = cluster.replica_of(primary)
    assert client.set(KEY, "v1")
    cluster.failover(replica)  # raises unless the roles swap within its timeout
    assert replica.role == "primary"
    assert primary.role == "replica"
    assert cluster.primary_for_key(KEY) is replica
    assert cluster.replica_of(replica) is primary
    assert retry(lambda: client.set(KEY, "v2"))
    owner = client.get_node_from_key(KEY)
    assert owner is not None
    assert owner.port == replica.port
    assert retry(lambda: client.get(KEY)) == "v2"


def test_pause_primary_then_resume(cluster: LocalCluster) -> None:
    primary = cluster.primary_for_slot(0)
    replica = cluster.replica_of(primary)
    cluster.pause_node(primary)
    assert primary.role == "paused"
    wait_role(replica, "primary", timeout=10.0)
    cluster.resume_node(primary)
    cluster.wait_healthy(30)
    assert primary.role == "replica"
    assert cluster.primary_for_slot(0) is replica


def test_teardown_leaves_no_process(tmp_path: Path) -> None:
    cluster = LocalCluster(base_dir=tmp_path / "c").start()
    try:
        victim = cluster.primary_for_slot(100)
        cluster.kill_node(victim)
        cluster.restart_node(victim)  # a second pid for the same node
        cluster.pause_node(cluster.replica_of(cluster.primary_for_slot(16000)))
        pids = list(cluster.started_pids)
        assert len(pids) == 7
        assert sum(alive(p, "valkey-server") for p in pids) == 6
    finally:
        cluster.stop()
    assert not [p for p in pids if alive(p, "valkey-server")]
    assert all(n.pid is None for n in cluster.nodes)
    cluster.stop()  # idempotent


def test_a_kept_cluster_reopens_with_its_keys_after_every_node_is_killed(tmp_path: Path) -> None:
    """kill -9 of every node (its owner crashed), then reopen: the same nodes (ports, ids,
    slots) come back healthy on their own data and the keys are there."""
    base = tmp_path / "kept"
    assert not LocalCluster.kept(base)
    with pytest.raises(InvalidArgument, match="no cluster to reopen"):
        LocalCluster.reopen(base)
    first = LocalCluster(base_dir=base).start()
    try:
        for node in first.nodes:  # each write on disk before its reply: the kill loses none
            node.command("CONFIG", "SET", "appendfsync", "always")
        rc = RedisCluster(startup_nodes=[RedisClusterNode(h, p) for h, p in first.startup_nodes])
        for i in range(30):
            rc.set(f"k{i}", i)
        rc.close()
        ids = {n.port: n.node_id for n in first.nodes}
        for node in first.nodes:
            first.kill_node(node)
    finally:
        first.stop()
    assert LocalCluster.kept(base) and (base / "node-0" / "nodes.conf").exists()
    with pytest.raises(InvalidArgument, match="already holds a cluster"):
        LocalCluster(base_dir=base).start()
    again = LocalCluster.reopen(base)
    try:
        assert {n.port: n.node_id for n in again.nodes} == ids
        rc = RedisCluster(startup_nodes=[RedisClusterNode(h, p) for h, p in again.startup_nodes])
        assert [int(rc.get(f"k{i}") or -1) for i in range(30)] == list(range(30))
        rc.close()
    finally:
        again.stop()
    assert LocalCluster.kept(base)  # the caller's directory is never removed


def test_owned_base_dir_is_removed() -> None:
    with LocalCluster(primaries=1, replicas_per_primary=0) as cluster:
        base = cluster.base_dir
        assert base.is_dir()
        assert [n.role for n in cluster.nodes] == ["primary"]
    assert not base.exists()


def test_command_line_entry_runs_until_sigterm() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "echomq.servers.local_cluster"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    pids: list[int] = []
    try:
        assert proc.stdout is not None
        seed = ""
        for line in proc.stdout:
            pids += [int(m) for m in re.findall(r"pid=(\d+)", line)]
            if line.startswith("seed: "):
                seed = line.split()[1]
            if line.startswith("Ctrl-C"):
                break
        assert seed.startswith("redis://127.0.0.1:")
        assert len(pids) == 6
        with redis.Redis.from_url(seed) as r:
            assert b"cluster_state:ok" in r.execute_command("CLUSTER", "INFO")
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert not [p for p in pids if alive(p, "valkey-server")]
