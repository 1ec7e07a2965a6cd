"""Shared fixtures: one real Valkey for the session (embedded, or ECHOMQ_URL), fresh names."""

from __future__ import annotations

import itertools
import os
from collections.abc import AsyncIterator, Iterator

import pytest
import redis

from echomq import AsyncConnector, AsyncQueue, Connector
from echomq.server import EmbeddedValkey, server_url_from_env

_names = itertools.count()


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
def raw(valkey_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(valkey_url)
    yield client
    client.close()


@pytest.fixture
async def conn(valkey_url: str) -> AsyncIterator[AsyncConnector]:
    connector = AsyncConnector.from_url(valkey_url)
    yield connector
    await connector.aclose()


@pytest.fixture
def sync_conn(valkey_url: str) -> Iterator[Connector]:
    connector = Connector.from_url(valkey_url)
    yield connector
    connector.close()


@pytest.fixture
def queue(conn: AsyncConnector, qname: str) -> AsyncQueue:
    return AsyncQueue(conn, qname)


def keys_of(client: redis.Redis, queue: str) -> set[str]:
    """Every key of ``queue`` left in the server (the keyspace check after a scenario)."""
    return {k.decode() for k in client.scan_iter(match=f"emq:{{{queue}}}:*", count=1000)}
