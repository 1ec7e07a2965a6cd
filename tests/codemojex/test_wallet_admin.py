"""The game's administration SQL (``wallet/admin.py``) on a real PostgreSQL, and the rule
that every SQL statement of the game lives under ``wallet/``.

* Bad input is refused before anything is sent; a server refusal is a DatabaseError,
  never a psycopg exception.
* Databases are created and dropped (dropping twice is fine); a database can refuse new
  sessions and have its sessions ended.
"""

from __future__ import annotations

import ast
import uuid
from pathlib import Path

import psycopg
import pytest

from codemojex.domain.errors import ConfigurationError, DatabaseError
from codemojex.infra.pg import with_dbname
from codemojex.wallet.admin import (
    allow_connections,
    create_database,
    drop_database,
    set_statement_timeout_everywhere,
    terminate_client_backends,
)

GAME = Path(__file__).resolve().parents[2] / "src" / "codemojex"
# The opening words of a statement, as a string literal of the game would hold them.
STATEMENTS = ("SELECT ", "INSERT INTO", "UPDATE ", "DELETE FROM", "CREATE ", "DROP ", "ALTER ", "TRUNCATE ",
              "WITH ")


def _databases(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        return {r[0] for r in conn.execute("SELECT datname FROM pg_database").fetchall()}


def test_every_sql_statement_of_the_game_is_under_wallet() -> None:
    outside = []
    for path in GAME.rglob("*.py"):
        if path.relative_to(GAME).parts[0] == "wallet":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and node.value.lstrip().upper().startswith(STATEMENTS) \
                    and node.value.lstrip().split(" ", 1)[0].isupper():
                outside.append(f"{path.relative_to(GAME)}:{node.lineno}: {node.value[:40]!r}")
    assert outside == []


@pytest.mark.parametrize("name", ["Bad", "1st", "a-b", "x" * 64, "a;drop"])
async def test_a_bad_database_name_is_refused_before_anything_is_sent(pg_url: str, name: str) -> None:
    before = _databases(pg_url)
    with pytest.raises(ConfigurationError, match="database name"):
        await create_database(pg_url, name)
    with pytest.raises(ConfigurationError, match="database name"):
        await drop_database(pg_url, name)
    assert _databases(pg_url) == before


async def test_create_and_drop_a_database(pg_url: str) -> None:
    name = f"admin_{uuid.uuid4().hex[:8]}"
    url = await create_database(pg_url, name)
    try:
        assert url == with_dbname(pg_url, name) and name in _databases(pg_url)
        with pytest.raises(DatabaseError, match="already exists"):
            await create_database(pg_url, name)  # the server's refusal, not psycopg's type
    finally:
        await drop_database(pg_url, name)
    assert name not in _databases(pg_url)
    await drop_database(pg_url, name)  # already gone: nothing to do


async def test_a_database_refuses_sessions_and_has_them_ended(pg_url: str) -> None:
    name = f"admin_{uuid.uuid4().hex[:8]}"
    url = await create_database(pg_url, name)
    try:
        async with await psycopg.AsyncConnection.connect(url) as session:
            await allow_connections(pg_url, name, False)
            with pytest.raises(psycopg.OperationalError):
                await psycopg.AsyncConnection.connect(url)
            assert await terminate_client_backends(pg_url, name) == 1
            with pytest.raises(psycopg.OperationalError):
                await session.execute("SELECT 1")
        await allow_connections(pg_url, name, True)
        async with await psycopg.AsyncConnection.connect(url) as again:
            assert await (await again.execute("SELECT 1")).fetchone() == (1,)
    finally:
        await drop_database(pg_url, name)


@pytest.mark.parametrize("setting", ["", "2 ms; DROP TABLE players", "fast", "-1ms"])
async def test_a_bad_statement_timeout_is_refused_before_anything_is_sent(pg_url: str, setting: str) -> None:
    with pytest.raises(ConfigurationError, match="statement_timeout"):
        await set_statement_timeout_everywhere(pg_url, setting)
    with psycopg.connect(pg_url) as conn:
        row = conn.execute("SELECT setting, source FROM pg_settings"
                           " WHERE name = 'statement_timeout'").fetchone()
    assert row is not None and row[1] != "configuration file"
