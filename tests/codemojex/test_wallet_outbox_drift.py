"""Migration 0052 copies echomq's outbox DDL (``OutboxTable("cm_outbox").install_sql()``) as a
frozen snapshot; these tests notice when the two part ways, comparing PostgreSQL's catalog
(columns and their types, defaults and nullability, the id sequence, indexes, constraints,
triggers and their functions' source, privileges):

* echomq's DDL applied to the migrated database changes nothing there (run in a
  transaction and rolled back, so the module's database is left as it was);
* the table echomq's DDL creates on its own (in a schema of its own, same names) is the
  table the migration made, but for what the migration adds on purpose (the ``job_id``
  index the reconciler's lookups use, and the game role's grants).

A failure here means echomq's outbox schema changed: write a new migration that brings
``cm_outbox`` to it (a migration is never edited), then update ``MIGRATION_ADDS``."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from echomq.outbox import OutboxTable

TABLE = "cm_outbox"
# What 0052 adds to echomq's table on purpose, as the catalog shows it.
MIGRATION_ADDS = {("index", "CREATE INDEX cm_outbox_job_id ON cm_outbox USING btree (job_id)")}

Catalog = set[tuple[Any, ...]]


async def _rows(conn: AsyncConnection[Any], sql: str, oid: int) -> list[tuple[Any, ...]]:
    return list(await (await conn.execute(sql, (oid,))).fetchall())


async def catalog(conn: AsyncConnection[Any], schema: str, *, grants: bool = True) -> Catalog:
    """What PostgreSQL's catalog says of ``schema.cm_outbox``, written as that schema sees
    itself (the search path set to it, and ``schema.`` taken out of the definitions that
    always qualify names). ``grants``: with the owner and the table's and columns' privileges."""
    await conn.execute(f'SET LOCAL search_path = "{schema}"')
    raw = await _catalog(conn, schema, grants=grants)
    return {tuple(v.replace(f"{schema}.", "") if isinstance(v, str) else v for v in row) for row in raw}


async def _catalog(conn: AsyncConnection[Any], schema: str, *, grants: bool) -> Catalog:
    row = await (await conn.execute(
        "SELECT c.oid, c.relkind, c.relpersistence, c.reloptions,"
        " c.relowner::regrole::text, c.relacl::text[] FROM pg_class c"
        " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s",
        (schema, TABLE))).fetchone()
    assert row is not None, f"no {schema}.{TABLE}"
    oid, kind, persistence, options, owner, acl = row
    out: Catalog = {("table", kind, persistence, str(options))}
    if grants:
        out.add(("grants", owner, tuple(sorted(acl or ()))))
    for r in await _rows(conn, "SELECT attnum, attname, format_type(atttypid, atttypmod), attnotnull,"
                               " pg_get_expr(d.adbin, d.adrelid), attidentity, attgenerated,"
                               " attcollation::regcollation::text"
                               " FROM pg_attribute a LEFT JOIN pg_attrdef d"
                               " ON d.adrelid = a.attrelid AND d.adnum = a.attnum"
                               " WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped", oid):
        out.add(("column", *r))
    if grants:
        for r in await _rows(conn, "SELECT attname, attacl::text[] FROM pg_attribute WHERE attrelid = %s"
                                   " AND attnum > 0 AND attacl IS NOT NULL", oid):
            out.add(("column grants", r[0], tuple(sorted(r[1]))))
    for (definition,) in await _rows(conn, "SELECT pg_get_indexdef(indexrelid) FROM pg_index"
                                           " WHERE indrelid = %s", oid):
        out.add(("index", definition))
    for r in await _rows(conn, "SELECT conname, contype, pg_get_constraintdef(oid) FROM pg_constraint"
                               " WHERE conrelid = %s", oid):
        out.add(("constraint", *r))
    for r in await _rows(conn, "SELECT t.tgname, pg_get_triggerdef(t.oid), t.tgenabled, p.proname,"
                               " p.prosrc, p.provolatile, p.prosecdef, l.lanname,"
                               " format_type(p.prorettype, NULL), p.proconfig::text"
                               " FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid"
                               " JOIN pg_language l ON l.oid = p.prolang"
                               " WHERE t.tgrelid = %s AND NOT t.tgisinternal", oid):
        out.add(("trigger", *r))
    for r in await _rows(conn, "SELECT s.relname, format_type(q.seqtypid, NULL), q.seqstart, q.seqincrement,"
                               " q.seqmax, q.seqmin, q.seqcache, q.seqcycle"
                               " FROM pg_depend d JOIN pg_class s ON s.oid = d.objid"
                               " JOIN pg_sequence q ON q.seqrelid = s.oid"
                               " WHERE d.refobjid = %s AND d.deptype IN ('a', 'i') AND s.relkind = 'S'", oid):
        out.add(("sequence", *r))
    return out


async def _schema_of_table(conn: AsyncConnection[Any]) -> str:
    row = await (await conn.execute("SELECT n.nspname FROM pg_class c JOIN pg_namespace n"
                                    " ON n.oid = c.relnamespace WHERE c.oid = %s::regclass",
                                    (TABLE,))).fetchone()
    assert row is not None
    return str(row[0])


async def test_echomqs_outbox_ddl_changes_nothing_in_the_migrated_database(pool: AsyncConnectionPool) -> None:
    async with pool.connection() as conn:
        await conn.set_autocommit(False)
        try:
            schema = await _schema_of_table(conn)
            before = await catalog(conn, schema)
            await conn.execute(OutboxTable(TABLE).install_sql())
            after = await catalog(conn, schema)
        finally:
            await conn.rollback()
    assert ("index", "CREATE INDEX cm_outbox_job_id ON cm_outbox USING btree (job_id)") in before
    assert any(k[0] == "trigger" for k in before) and any(k[0] == "sequence" for k in before)
    assert after - before == set(), "echomq's outbox DDL adds to the migrated table"
    assert before - after == set(), "echomq's outbox DDL changes the migrated table"


async def test_the_migrated_outbox_is_echomqs_table_plus_its_job_id_index(pool: AsyncConnectionPool) -> None:
    async with pool.connection() as conn:
        await conn.set_autocommit(False)
        try:
            migrated = await catalog(conn, await _schema_of_table(conn), grants=False)
            await conn.execute("CREATE SCHEMA echomq_drift")
            await conn.execute("SET LOCAL search_path = echomq_drift")
            await conn.execute(OutboxTable(TABLE).install_sql())  # unqualified: made in echomq_drift
            fresh = await catalog(conn, "echomq_drift", grants=False)
        finally:
            await conn.rollback()
    assert migrated - fresh == MIGRATION_ADDS, "the migration and echomq's outbox DDL differ"
    assert fresh - migrated == set(), "echomq's outbox DDL has what the migration lacks"
