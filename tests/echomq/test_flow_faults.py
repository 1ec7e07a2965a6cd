"""Flows under kill -9 (decision 0038), on one server and on the 3+3 cluster: 200 flows of
1-50 children over two queues on different cluster slots, drained by three consumer
processes and one relay-only process, one of which is killed with SIGKILL (and restarted)
after each of ten waves of admission and then every 0.2-0.6 s until all have ended. At the
end every parent has been released exactly once (its row's ``released``, counted by the
server) and only after all of its children ended (checked by the handler that runs the
parent), or failed by its policy; no parent waits, no notice is left."""

from __future__ import annotations

import asyncio
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from echomq import AsyncQueue
from echomq.client._async.cluster import AsyncClusterConnector
from echomq.servers.local_cluster import LocalCluster
from tests.conftest import cluster_url
from tests.echomq.flow_audit import admit_random, audit, ended, states
from tests.echomq.test_cluster import names_on_distinct_primaries
from tests.echomq.test_flows import other_slot

ROOT = Path(__file__).resolve().parents[2]
FLOWS = 200
WAVES = 10


def _spawn(url: str, a: str, b: str, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "tests.echomq.flow_worker_proc", url, a, b, *extra],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_every_parent_released_exactly_once_under_kill_9(
        conn: Any, backend_url: str, qname: str) -> None:
    rng = random.Random(27)
    a, b = qname, other_slot(qname)
    qa = AsyncQueue(conn, a)
    procs = [_spawn(backend_url, a, b) for _ in range(3)] + [_spawn(backend_url, a, b, "--relay-only")]
    kills = 0

    def kill_one() -> None:
        nonlocal kills
        i = rng.randrange(len(procs))
        procs[i].send_signal(signal.SIGKILL)
        procs[i].wait()
        kills += 1
        procs[i] = _spawn(backend_url, a, b, *(["--relay-only"] if i == 3 else []))

    parents: dict[str, Any] = {}
    try:
        # The flows arrive in waves with a kill after each, so the kills land while work is
        # in flight however fast the drain is (a quiet machine once drained all 200 flows
        # between three time-paced kills); then kills go on, paced by time, until all end.
        for _ in range(WAVES):
            parents |= await admit_random(conn, rng, FLOWS // WAVES, [a, b])
            time.sleep(rng.uniform(0.1, 0.3))  # noqa: ASYNC251 (the consumers are other processes)
            kill_one()
        deadline = time.monotonic() + 240
        while not ended(counts := await states(conn, parents)):
            assert time.monotonic() < deadline, counts
            time.sleep(rng.uniform(0.2, 0.6))  # noqa: ASYNC251 (the consumers are other processes)
            kill_one()
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    result = await audit(conn, parents, [a, b], a)
    assert (result.doubles, result.early) == (0, 0), result
    assert result.released + result.failed == FLOWS
    print(f"\n{result.line()}, kills {kills}")
    await qa.fence()


@pytest.mark.slow
@pytest.mark.cluster
@pytest.mark.timeout(400)
async def test_a_primary_killed_while_children_complete_on_it(tmp_path: Any) -> None:
    """The 3+3 cluster, the parents' queue on one primary and most children's on another;
    that second primary is killed with SIGKILL while children complete on it; its replica
    takes over. Every parent is still released exactly once, after all its children."""
    with LocalCluster(primaries=3, replicas_per_primary=1, node_timeout_ms=2000) as cluster:
        url = cluster_url(cluster)
        conn = AsyncClusterConnector.from_url(url)
        a, b = names_on_distinct_primaries(cluster, "flowkill")[:2]
        victim = cluster.primary_for_key(f"emq:{{{b}}}:pending")
        replica = cluster.replica_of(victim)
        try:
            parents = await admit_random(conn, random.Random(28), 120, [a, b, b], max_children=30)
            procs = [_spawn(url, a, b) for _ in range(3)] + [_spawn(url, a, b, "--relay-only")]
            try:
                while (counts := await states(conn, parents))["done"] < len(parents) // 5:  # noqa: ASYNC110
                    await asyncio.sleep(0.1)
                done_before = counts["done"]
                cluster.kill_node(victim)  # children of b are completing on it now
                killed_at = time.monotonic()
                while replica.role != "primary":
                    assert time.monotonic() - killed_at < 20, "replica not promoted"
                    await asyncio.sleep(0.05)
                promoted_after = time.monotonic() - killed_at
                deadline = time.monotonic() + 240
                while not ended(counts := await states(conn, parents)):
                    assert time.monotonic() < deadline, counts
                    await asyncio.sleep(0.2)
            finally:
                for proc in procs:
                    proc.kill()
                    proc.wait()
            result = await audit(conn, parents, [a, b], a)
        finally:
            await conn.aclose()
    assert (result.doubles, result.early) == (0, 0), result
    assert result.released + result.failed == len(parents)
    print(f"\n{result.line()}; primary of {b} killed with {done_before} parents done, "
          f"replica promoted after {promoted_after:.2f}s")
