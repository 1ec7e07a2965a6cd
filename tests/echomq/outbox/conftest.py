"""Fixtures of the outbox tests: one real PostgreSQL (embedded, or CODEMOJEX_DATABASE_URL) for
the session, a fresh database per test with the outbox installed, started the way
the project starts one (:class:`codemojex.infra.pg.PgServer`); Valkey from tests/conftest.py.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import psycopg
import pytest

from codemojex.infra.pg import PgServer, with_dbname
from echomq.outbox import Outbox

_dbs = itertools.count()


@pytest.fixture(scope="session")
def outbox_pg() -> Iterator[PgServer]:
    """The session's PostgreSQL server (the fault tests start one of their own)."""
    server = PgServer.from_env()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def fresh_database(admin_url: str) -> str:
    """A new empty database on the server; its URL."""
    name = f"outbox_{os.getpid()}_{next(_dbs)}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = with_dbname(admin_url, name)
    with psycopg.connect(url) as conn:
        Outbox().install(conn)
    return url


@pytest.fixture
def pg_db(outbox_pg: PgServer) -> str:
    """A database of this test's own, the outbox installed (dropped with the server). Per
    test, not per module: the relay drains every queue's rows, so a row another test of the
    module left made a count off by one (CI 2026-12-04: admitted 2 for 1)."""
    return fresh_database(outbox_pg.url)
