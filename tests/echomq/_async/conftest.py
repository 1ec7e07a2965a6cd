"""Fixtures of the API tests, written once for asyncio; the blocking copy is generated.

``conn`` is a connector of the backend (the single server, or the local cluster: the
root conftest runs every test on both) and ``queue`` a queue with a fresh name on it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from echomq import AsyncClusterConnector, AsyncConnector, AsyncQueue


@pytest.fixture
async def conn(backend: str, backend_url: str) -> AsyncIterator[AsyncConnector | AsyncClusterConnector]:
    cls = AsyncClusterConnector if backend == "cluster" else AsyncConnector
    async with cls.from_url(backend_url) as connector:
        yield connector


@pytest.fixture
def queue(conn: AsyncConnector | AsyncClusterConnector, qname: str) -> AsyncQueue:
    return AsyncQueue(conn, qname)
