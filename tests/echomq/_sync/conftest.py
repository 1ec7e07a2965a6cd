# Generated from tests/echomq/_async/conftest.py by scripts/unasync_gen.py. Do not edit.
"""Fixtures of the API tests, written once for asyncio; the blocking copy is generated.

``conn`` is a connector of the backend (the single server, or the local cluster: the
root conftest runs every test on both) and ``queue`` a queue with a fresh name on it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from echomq import ClusterConnector, Connector, Queue


@pytest.fixture
def conn(backend: str, backend_url: str) -> Iterator[Connector | ClusterConnector]:
    cls = ClusterConnector if backend == "cluster" else Connector
    with cls.from_url(backend_url) as connector:
        yield connector


@pytest.fixture
def queue(conn: Connector | ClusterConnector, qname: str) -> Queue:
    return Queue(conn, qname)
