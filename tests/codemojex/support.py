"""Test helpers: throwaway databases and unique ids."""

from __future__ import annotations

import re
import uuid

import psycopg
from psycopg import sql


def _db_name(prefix: str) -> str:
    return f"{re.sub(r'[^a-z0-9_]', '_', prefix.lower())[:30]}_{uuid.uuid4().hex[:8]}"


def make_database(admin_url: str, prefix: str) -> str:
    """Create a fresh empty database; return its name."""
    name = _db_name(prefix)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return name


def drop_database(admin_url: str, name: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def new_id(kind: str = "JOB") -> str:
    """A unique id for a test row (not a branded id; the wallet does not require one)."""
    return f"{kind}{uuid.uuid4().hex.upper()}"
