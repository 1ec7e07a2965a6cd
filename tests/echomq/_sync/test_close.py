# Generated from tests/echomq/_async/test_close.py by scripts/unasync_gen.py. Do not edit.
"""Closing a connector: a server that cannot confirm a close (redis-py raises after its
connect timeout, the socket already closed on this side) does not fail ``close()``, and a
cluster connector closes every node's connections whatever one of them raised (a failover
once left the other nodes' sockets open: test_sharded_cluster's kill -9 in a CI run)."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from echomq import ClusterConnector, Connector, Queue, ServerUnavailable
from echomq.servers.local_cluster import LocalCluster
from tests.conftest import cluster_url


def test_a_close_the_server_cannot_confirm_is_no_failure(
        conn: Connector | ClusterConnector, queue: Queue) -> None:
    queue.stats()  # connections open on every node the queue's calls reached
    nodes: list[Any] = list(conn._nodes.values()) if isinstance(conn, ClusterConnector) else [conn]
    assert nodes
    for node in nodes:
        def unconfirmed(*args: Any, _original: Any = node.client.close, **kwargs: Any) -> None:
            _original(*args, **kwargs)
            raise redis.exceptions.TimeoutError("Timed out closing connection after 5.0")

        node.client.close = unconfirmed
    conn.close()  # no error: every socket is closed on this side


@pytest.mark.cluster
def test_a_cluster_connector_closes_every_node_whatever_one_raised(
        local_cluster: LocalCluster, qname: str) -> None:
    conn = ClusterConnector.from_url(cluster_url(local_cluster))
    for i in range(12):  # names whose slots fall on more than one primary
        Queue(conn, f"{qname}-{i}").stats()
    nodes: list[Any] = list(conn._nodes.values())
    assert len(nodes) >= 2
    closed: list[Any] = []
    for i, node in enumerate(nodes):
        def close(_original: Any = node.close, _node: Any = node, _fails: bool = i == 0) -> None:
            _original()
            closed.append(_node)
            if _fails:
                raise ServerUnavailable("server unreachable: this node's close failed")

        node.close = close
    with pytest.raises(ServerUnavailable):
        conn.close()
    assert len(closed) == len(nodes)  # the others were closed too
