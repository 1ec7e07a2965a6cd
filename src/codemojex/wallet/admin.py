"""Server administration statements: databases, backends and server settings.

These are the game's only SQL statements that move no money; they live here with the
rest of its SQL so that every statement of the game is under ``wallet/``. Each call
opens its own ``autocommit`` connection to the server of ``url`` (a database cannot be
created or dropped inside a transaction, and ``ALTER SYSTEM`` refuses one), and, like
every wallet call, lets no ``psycopg`` exception type out: a failure is a
:class:`~codemojex.domain.errors.DatabaseError` with the server's first line.

* :func:`create_database` / :func:`drop_database`: a database per test or per run;
  the name is checked before anything is sent (lowercase letters, digits, ``_``).
* :func:`terminate_client_backends`: ``pg_terminate_backend`` of every client session
  but the caller's, on the server or one database (the chaos run's ``pg_terminate``
  fault); :func:`allow_connections` refuses or allows a database's new sessions.
* :func:`set_statement_timeout_everywhere`: ``ALTER SYSTEM`` plus a reload, which reaches
  existing sessions too (the chaos run's ``pg_timeout_storm``); ``None`` resets it. The
  caller's own session is exempt from its start (``statement_timeout=0``), so the
  statement that ends a storm cannot itself time out.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import psycopg
from psycopg import conninfo, sql
from psycopg.rows import TupleRow

from codemojex.domain.errors import ConfigurationError, DatabaseError

__all__ = [
    "allow_connections",
    "create_database",
    "drop_database",
    "set_statement_timeout_everywhere",
    "terminate_client_backends",
]

_DB_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_TIMEOUT = re.compile(r"\d{1,9}(ms|s|min)?")


def _check_name(name: str) -> None:
    if not _DB_NAME.fullmatch(name):
        raise ConfigurationError(f"database name {name!r}: lowercase letters, digits, _")


@asynccontextmanager
async def _admin(url: str, *, exempt: bool = False) -> AsyncIterator[psycopg.AsyncConnection[TupleRow]]:
    """One autocommit session on the server of ``url``; psycopg errors become DatabaseError."""
    options = "-c statement_timeout=0" if exempt else ""
    try:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True, options=options) as conn:
            yield conn
    except psycopg.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DatabaseError(f"PostgreSQL administration failed: {first}") from exc


async def create_database(url: str, name: str) -> str:
    """Create database ``name`` on the server of ``url``; return a conninfo for it."""
    _check_name(name)
    async with _admin(url) as conn:
        await conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return conninfo.make_conninfo(url, dbname=name)


async def drop_database(url: str, name: str) -> None:
    """Drop database ``name`` (if it exists), disconnecting its sessions."""
    _check_name(name)
    async with _admin(url) as conn:
        await conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


async def terminate_client_backends(url: str, dbname: str | None = None) -> int:
    """End every client session on the server (or only those on database ``dbname``) but
    this call's own; return how many ended."""
    query = ("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
             " WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
             " AND (%(db)s::text IS NULL OR datname = %(db)s::text)")
    async with _admin(url) as conn:
        rows = await (await conn.execute(query, {"db": dbname})).fetchall()
    return sum(1 for (ended,) in rows if ended)


async def allow_connections(url: str, dbname: str, allow: bool) -> None:
    """Let database ``dbname`` accept new connections, or refuse them (``ALLOW_CONNECTIONS``;
    sessions already open stay until ended)."""
    _check_name(dbname)
    async with _admin(url) as conn:
        await conn.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS {}").format(
            sql.Identifier(dbname), sql.Literal(allow)))


async def set_statement_timeout_everywhere(url: str, setting: str | None) -> None:
    """Set the server-wide ``statement_timeout`` (e.g. ``'2ms'``) for every session, existing
    ones included; ``None`` resets it to the configuration file's value."""
    if setting is not None and not _TIMEOUT.fullmatch(setting):
        raise ConfigurationError(f"statement_timeout {setting!r}: a number with ms, s or min")
    async with _admin(url, exempt=True) as conn:
        if setting is None:
            await conn.execute("ALTER SYSTEM RESET statement_timeout")
        else:
            await conn.execute(sql.SQL("ALTER SYSTEM SET statement_timeout = {}").format(
                sql.Literal(setting)))
        await conn.execute("SELECT pg_reload_conf()")
