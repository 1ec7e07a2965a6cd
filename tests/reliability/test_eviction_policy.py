"""Memory pressure at start-up: a consumer refuses a server that could evict jobs."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from echomq import AsyncClusterConnector, AsyncConnector, AsyncQueue, Lease
from echomq.core.eviction import UnsafeEvictionPolicy, check_eviction_policy
from echomq.runtime.consumer import Consumer, ConsumerOptions
from echomq.servers.local_cluster import LocalCluster
from echomq.servers.server import EmbeddedValkey


@pytest.fixture
def lru_server() -> Iterator[EmbeddedValkey]:
    with EmbeddedValkey(appendonly=False, extra={"maxmemory": "64mb",
                                                 "maxmemory-policy": "allkeys-lru"}) as server:
        yield server


async def _noop(lease: Lease) -> None:
    return None


async def test_a_consumer_refuses_a_server_that_evicts(lru_server: EmbeddedValkey) -> None:
    conn = AsyncConnector.from_url(lru_server.url)
    try:
        consumer = Consumer(AsyncQueue(conn, "evict"), _noop)
        with pytest.raises(UnsafeEvictionPolicy, match="maxmemory-policy allkeys-lru"):
            await asyncio.wait_for(consumer.run(), 10)
    finally:
        await conn.aclose()


async def test_allow_eviction_runs_with_a_warning(lru_server: EmbeddedValkey,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    conn = AsyncConnector.from_url(lru_server.url)
    try:
        consumer = Consumer(AsyncQueue(conn, "evict"), _noop,
                            options=ConsumerOptions(allow_eviction=True))
        with caplog.at_level(logging.WARNING, logger="echomq.core.eviction"):
            task = asyncio.create_task(consumer.run())
            for _ in range(500):
                if any("allkeys-lru" in r.getMessage() for r in caplog.records):
                    break
                await asyncio.sleep(0.01)
            consumer.stop()
            await asyncio.wait_for(task, 10)
        assert any("allkeys-lru" in r.getMessage() and "running anyway" in r.getMessage()
                   for r in caplog.records)
    finally:
        await conn.aclose()


async def test_noeviction_is_quiet(valkey_url: str, caplog: pytest.LogCaptureFixture) -> None:
    conn = AsyncConnector.from_url(valkey_url)
    try:
        with caplog.at_level(logging.WARNING, logger="echomq.core.eviction"):
            assert await check_eviction_policy(conn) == {}
        assert not caplog.records
    finally:
        await conn.aclose()


@pytest.mark.cluster
async def test_every_primary_of_a_cluster_is_checked(local_cluster: LocalCluster) -> None:
    url = "redis+cluster://" + ",".join(f"{h}:{p}" for h, p in local_cluster.startup_nodes)
    conn = AsyncClusterConnector.from_url(url)
    primary = local_cluster.primary_for_slot(16000)
    client = redis.Redis(host=primary.host, port=primary.port)
    try:
        assert await check_eviction_policy(conn) == {}
        client.config_set("maxmemory-policy", "volatile-lru")
        with pytest.raises(UnsafeEvictionPolicy, match=f"{primary.port} has maxmemory-policy volatile-lru"):
            await check_eviction_policy(conn)
        assert await check_eviction_policy(conn, allow=True) == {
            f"{primary.host}:{primary.port}": "volatile-lru"}
    finally:
        client.config_set("maxmemory-policy", "noeviction")
        client.close()
        await conn.aclose()


ECHOMQ = [sys.executable, "-c", "from echomq.ops.cli import main; main()"]
ROOT = Path(__file__).resolve().parents[2]


def test_echomq_worker_refuses_in_one_line_unless_allowed(lru_server: EmbeddedValkey) -> None:
    cmd = [*ECHOMQ, "worker", "tests.echomq.worker_targets:ok", "--queue", "evict", "--url",
           lru_server.url, "--burst"]
    refused = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines()[-1].startswith("echomq: error: ")
    assert "maxmemory-policy allkeys-lru" in refused.stderr and "Traceback" not in refused.stderr
    allowed = subprocess.run([*cmd, "--allow-eviction"], cwd=ROOT, capture_output=True, text=True,
                             timeout=60)
    assert allowed.returncode == 0, allowed.stderr
    assert "allkeys-lru" in allowed.stderr and "running anyway" in allowed.stderr
