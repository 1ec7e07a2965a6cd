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
* **Run as the owner role.** Pending migrations run as :data:`OWNER_ROLE`
  (``SET LOCAL ROLE``), which owns every table (objects an earlier version created as
  the connecting user are handed to it first). The game itself runs as
  :data:`GAME_ROLE` (:func:`codemojex.infra.pg.open_pool` ``role=``), which migration
  ``0007_roles`` grants INSERT and SELECT on the money history and no UPDATE, DELETE,
  TRUNCATE or ALTER there. Both roles are created here (NOLOGIN) when missing, which
  needs a connecting user with CREATEROLE (the embedded server's is a superuser); an
  operator's database can have them created beforehand instead.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources

import psycopg
from psycopg_pool import AsyncConnectionPool

from codemojex.domain.errors import MigrationError

__all__ = ["GAME_ROLE", "MIGRATION_LOCK", "OWNER_ROLE", "Migration", "load_migrations", "migrate"]

# pg_advisory_xact_lock key: any fixed bigint unique to this application ("cmx" + 1).
MIGRATION_LOCK = 0x636D7801
_NAME = re.compile(r"(\d{4})_([a-z0-9_]+)\.sql")
OWNER_ROLE = "codemojex_owner"  # owns the schema's objects; migrations run as it
GAME_ROLE = "codemojex_game"  # the game's privileges (0007_roles)

# The roles (cluster-wide: created once, by whichever database migrates first; a concurrent
# creation elsewhere is not an error), the connecting user's membership in them (needed
# for SET ROLE unless it is a superuser), and the owner's right to create in the schema.
_ROLES = f"""
DO $$
DECLARE r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['{OWNER_ROLE}', '{GAME_ROLE}'] LOOP
        IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = r) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', r);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
            END;
        END IF;
        IF NOT pg_has_role(current_user, r, 'MEMBER') THEN
            EXECUTE format('GRANT %I TO %I', r, current_user);
        END IF;
    END LOOP;
    EXECUTE format('GRANT USAGE, CREATE ON SCHEMA public TO %I', '{OWNER_ROLE}');
END $$"""

# What the connecting user owns in the schema (tables with their sequences, functions)
# becomes the owner role's.
_ADOPT = f"""
DO $$
DECLARE o record;
BEGIN
    FOR o IN SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND c.relowner = current_user::regrole
    LOOP
        EXECUTE format('ALTER TABLE public.%I OWNER TO %I', o.relname, '{OWNER_ROLE}');
    END LOOP;
    FOR o IN SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = 'public' AND c.relkind = 'S' AND c.relowner = current_user::regrole
    LOOP
        EXECUTE format('ALTER SEQUENCE public.%I OWNER TO %I', o.relname, '{OWNER_ROLE}');
    END LOOP;
    FOR o IN SELECT p.oid::regprocedure AS f FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
             WHERE n.nspname = 'public' AND p.proowner = current_user::regrole
    LOOP
        EXECUTE format('ALTER FUNCTION %s OWNER TO %I', o.f, '{OWNER_ROLE}');
    END LOOP;
END $$"""


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
            if m.version in done and done[m.version] != m.checksum:
                raise MigrationError(f"migration {m.version:04d}_{m.name} changed since applied")
        if all(m.version in done for m in migrations):
            return applied_now
        try:
            await conn.execute(_ROLES.encode())
            await conn.execute(_ADOPT.encode())
            await conn.execute(f"SET LOCAL ROLE {OWNER_ROLE}".encode())
        except psycopg.errors.InsufficientPrivilege as exc:
            raise MigrationError(
                f"migrations run as the role {OWNER_ROLE} and the game as {GAME_ROLE}: create both"
                f" (NOLOGIN), grant them to the migrating user, and grant {OWNER_ROLE} CREATE on the"
                f" schema public, or migrate as a user with CREATEROLE ({str(exc).strip()})") from None
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
