"""Closing a connector: a server that cannot confirm a close (redis-py raises after its
connect timeout, the socket already closed on this side) does not fail ``aclose()``, and a
cluster connector closes every node's connections whatever one of them raised (a failover
once left the other nodes' sockets open: test_sharded_cluster's kill -9 in a CI run)."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from echomq import AsyncClusterConnector, AsyncConnector, AsyncQueue, ServerUnavailable
from echomq.servers.local_cluster import LocalCluster
from tests.conftest import cluster_url


async def test_a_close_the_server_cannot_confirm_is_no_failure(
        conn: AsyncConnector | AsyncClusterConnector, queue: AsyncQueue) -> None:
    await queue.stats()  # connections open on every node the queue's calls reached
    nodes: list[Any] = list(conn._nodes.values()) if isinstance(conn, AsyncClusterConnector) else [conn]
    assert nodes
    for node in nodes:
        async def unconfirmed(*args: Any, _original: Any = node.client.aclose, **kwargs: Any) -> None:
            await _original(*args, **kwargs)
            raise redis.exceptions.TimeoutError("Timed out closing connection after 5.0")

        node.client.aclose = unconfirmed
    await conn.aclose()  # no error: every socket is closed on this side


@pytest.mark.cluster
async def test_a_cluster_connector_closes_every_node_whatever_one_raised(
        local_cluster: LocalCluster, qname: str) -> None:
    conn = AsyncClusterConnector.from_url(cluster_url(local_cluster))
    for i in range(12):  # names whose slots fall on more than one primary
        await AsyncQueue(conn, f"{qname}-{i}").stats()
    nodes: list[Any] = list(conn._nodes.values())
    assert len(nodes) >= 2
    closed: list[Any] = []
    for i, node in enumerate(nodes):
        async def close(_original: Any = node.aclose, _node: Any = node, _fails: bool = i == 0) -> None:
            await _original()
            closed.append(_node)
            if _fails:
                raise ServerUnavailable("server unreachable: this node's close failed")

        node.aclose = close
    with pytest.raises(ServerUnavailable):
        await conn.aclose()
    assert len(closed) == len(nodes)  # the others were closed too
