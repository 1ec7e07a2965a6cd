"""Versioned SQL migrations, applied at start-up.

Files are ``migrations/NNNN_name.sql`` (package data), applied in version
order. Guarantees:

* **Re-runnable**: an applied version (recorded in ``schema_migrations``) is
  never applied again; re-running is a no-op.
* **Safe under concurrent starts**: the whole run holds a transaction-scoped
  advisory lock, taken before ``schema_migrations`` is even created, so two
  processes starting together apply each migration exactly once.
* **All or nothing**: pending migrations apply in one transaction.
* **Tamper-evident**: an applied version whose file changed raises
  :class:`MigrationError` instead of running on a schema we did not write.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources

from psycopg_pool import AsyncConnectionPool

from codemojex.errors import MigrationError

__all__ = ["MIGRATION_LOCK", "Migration", "load_migrations", "migrate"]

# pg_advisory_xact_lock key: any fixed bigint unique to this application ("cmx" + 1).
MIGRATION_LOCK = 0x636D7801
_NAME = re.compile(r"(\d{4})_([a-z0-9_]+)\.sql")


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def load_migrations() -> tuple[Migration, ...]:
    """The packaged migrations, by version. Raises MigrationError on a bad file name."""
    root = resources.files("codemojex.wallet") / "migrations"
    found: list[Migration] = []
    for entry in root.iterdir():
        if not entry.name.endswith(".sql"):
            continue
        m = _NAME.fullmatch(entry.name)
        if m is None:
            raise MigrationError(f"migration file {entry.name!r} is not NNNN_name.sql")
        found.append(Migration(int(m[1]), m[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise MigrationError(f"duplicate migration versions in {versions}")
    return tuple(found)


async def migrate(pool: AsyncConnectionPool) -> list[int]:
    """Apply every pending migration; return the versions applied by this call."""
    migrations = load_migrations()
    applied_now: list[int] = []
    async with pool.connection() as conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL, checksum text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        cur = await conn.execute("SELECT version, checksum FROM schema_migrations")
        done = {int(v): str(c) for v, c in await cur.fetchall()}
        for m in migrations:
            if m.version in done:
                if done[m.version] != m.checksum:
                    raise MigrationError(f"migration {m.version:04d}_{m.name} changed since applied")
                continue
            await conn.execute(m.sql.encode())
            await conn.execute(
                "INSERT INTO schema_migrations (version, name, checksum) VALUES (%s, %s, %s)",
                (m.version, m.name, m.checksum),
            )
            applied_now.append(m.version)
    return applied_now
