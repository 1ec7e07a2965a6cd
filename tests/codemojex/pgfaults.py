"""PostgreSQL faults for tests: terminate a database's backends, refuse its connections."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import psycopg
from psycopg import conninfo, sql
from psycopg_pool import AsyncConnectionPool


def dbname_of(pool: AsyncConnectionPool) -> str:
    return str(conninfo.conninfo_to_dict(pool.conninfo)["dbname"])


async def terminate_backends(admin_url: str, dbname: str) -> int:
    """pg_terminate_backend every session on ``dbname``; returns how many."""
    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = %s AND pid <> pg_backend_pid()", (dbname,))
        row = await cur.fetchone()
    return int(row[0]) if row else 0


async def _allow(admin_url: str, dbname: str, allow: bool) -> None:
    stmt = sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS {}").format(
        sql.Identifier(dbname), sql.Literal(allow))
    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
        await conn.execute(stmt)


@asynccontextmanager
async def refused(admin_url: str, dbname: str) -> AsyncIterator[None]:
    """An outage of one database: new connections refused, existing ones terminated."""
    await _allow(admin_url, dbname, False)
    try:
        await terminate_backends(admin_url, dbname)
        yield
    finally:
        await _allow(admin_url, dbname, True)
