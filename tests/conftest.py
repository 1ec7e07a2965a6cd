"""Shared fixtures: one real Valkey for the session (embedded, or ECHOMQ_URL), fresh names.

The queue suite (tests/echomq) runs twice, with the same assertions: against the single
server and against one session-wide local cluster (``backend`` = single/cluster; the
cluster variant is marked ``cluster``). Tests that need a server of their own
(``own_server``) or hand ``valkey_url`` to other processes stay single-server.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.cluster import ClusterNode, RedisCluster

from echomq import AsyncClusterConnector, AsyncConnector, AsyncQueue, ClusterConnector, Connector
from echomq.servers.local_cluster import LocalCluster
from echomq.servers.server import EmbeddedValkey, server_url_from_env
from tests.balance import pytest_collection_modifyitems  # noqa: F401  (the longest tests first)
from tests.cpu_use import pytest_runtest_protocol  # noqa: F401  (ECHOMQ_TEST_CPU=DIR: per-test CPU)

_names = itertools.count()
_ECHOMQ = Path(__file__).parent / "echomq"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """The queue suite runs on both backends; tests with a server of their own do not."""
    names = metafunc.fixturenames
    if ("backend" in names and _ECHOMQ in Path(metafunc.definition.path).parents
            and "own_server" not in names and "valkey_url" not in names):
        metafunc.parametrize(
            "backend", ["single", pytest.param("cluster", marks=pytest.mark.cluster)],
            indirect=True)


@pytest.fixture(scope="session")
def local_cluster() -> Iterator[LocalCluster]:
    """One 3+3 local cluster (node timeout 2 s) for the whole session, started on first use."""
    with LocalCluster(primaries=3, replicas_per_primary=1, node_timeout_ms=2000) as cluster:
        yield cluster


def cluster_url(cluster: LocalCluster) -> str:
    return "redis+cluster://" + ",".join(f"{h}:{p}" for h, p in cluster.startup_nodes)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """``single`` (the session's server) or ``cluster`` (the session's local cluster)."""
    return str(getattr(request, "param", "single"))


@pytest.fixture
def backend_url(backend: str, request: pytest.FixtureRequest) -> str:
    if backend == "cluster":
        return cluster_url(request.getfixturevalue("local_cluster"))
    return str(request.getfixturevalue("valkey_url"))


@pytest.fixture(scope="session")
def valkey_url() -> Iterator[str]:
    """The server every non-destructive test shares: ECHOMQ_URL, else an embedded one."""
    url = server_url_from_env()
    if url:
        yield url
        return
    with EmbeddedValkey() as server:
        yield server.url


@pytest.fixture
def own_server() -> Iterator[EmbeddedValkey]:
    """A private embedded server for tests that restart, kill or flush it."""
    with EmbeddedValkey() as server:
        yield server


@pytest.fixture
def qname() -> str:
    """A queue name no other test uses."""
    return f"t{os.getpid()}-{next(_names)}"


@pytest.fixture
def raw(backend: str, backend_url: str) -> Iterator[redis.Redis]:
    """A plain redis-py client of the backend (a RedisCluster on the cluster)."""
    client: Any
    if backend == "cluster":
        seeds = [ClusterNode(h, p) for h, p in AsyncClusterConnector.from_url(backend_url).seeds]
        client = RedisCluster(startup_nodes=seeds)
    else:
        client = redis.Redis.from_url(backend_url)
    yield client
    client.close()


@pytest.fixture
async def conn(backend: str, backend_url: str) -> AsyncIterator[AsyncConnector]:
    connector: Any = (AsyncClusterConnector if backend == "cluster" else AsyncConnector).from_url(
        backend_url)
    yield connector
    await connector.aclose()


@pytest.fixture
def sync_conn(backend: str, backend_url: str) -> Iterator[Connector]:
    connector: Any = (ClusterConnector if backend == "cluster" else Connector).from_url(backend_url)
    yield connector
    connector.close()


@pytest.fixture
def queue(conn: AsyncConnector, qname: str) -> AsyncQueue:
    return AsyncQueue(conn, qname)


def keys_of(client: redis.Redis, queue: str) -> set[str]:
    """Every key of ``queue`` left in the server (the keyspace check after a scenario)."""
    return {k.decode() for k in client.scan_iter(match=f"emq:{{{queue}}}:*", count=1000)}
