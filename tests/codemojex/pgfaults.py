"""PostgreSQL faults for tests: terminate a database's backends, refuse its connections."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from psycopg import conninfo
from psycopg_pool import AsyncConnectionPool

from codemojex.wallet.admin import allow_connections, terminate_client_backends


def dbname_of(pool: AsyncConnectionPool) -> str:
    return str(conninfo.conninfo_to_dict(pool.conninfo)["dbname"])


async def terminate_backends(admin_url: str, dbname: str) -> int:
    """pg_terminate_backend every client session on ``dbname``; returns how many."""
    return await terminate_client_backends(admin_url, dbname)


@asynccontextmanager
async def refused(admin_url: str, dbname: str) -> AsyncIterator[None]:
    """An outage of one database: new connections refused, existing ones terminated."""
    await allow_connections(admin_url, dbname, False)
    try:
        await terminate_backends(admin_url, dbname)
        yield
    finally:
        await allow_connections(admin_url, dbname, True)
