"""The outbox table in PostgreSQL: its SQL, its name, and ``install``. Pure SQL text here.

One row per job the application's transaction admitted::

    id       bigserial primary key   the row's number; the job id is derived from it
    queue    text                    the queue the relay admits the job onto
    payload  bytea                   the job's bytes
    options  jsonb                   the admission options (lane, delay_ms, ...), {} for none
    created  timestamptz             clock_timestamp() at the insert: the job id's time part
    error    text                    set by a relay when the queue refused the row for good
                                     (the row is then kept for a person and skipped)

A statement-level trigger sends ``NOTIFY <channel>`` after every insert; PostgreSQL delivers
a notification only when the inserting transaction commits, so a relay is woken by commits
and never by a transaction that rolled back (docs/decisions/0034-outbox.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from echomq.core.errors import InvalidArgument

__all__ = ["DEFAULT_TABLE", "OutboxTable"]

DEFAULT_TABLE = "echomq_outbox"
# A plain lower-case identifier, optionally schema-qualified: it is written into SQL as it
# is (quoted), and it names the NOTIFY channel and the ids' namespace, so keep it simple.
_NAME = re.compile(r"[a-z_][a-z0-9_]{0,40}")


@dataclass(frozen=True, slots=True)
class OutboxTable:
    """The outbox table's name (``table`` or ``schema.table``) and every statement on it."""

    name: str = DEFAULT_TABLE

    def __post_init__(self) -> None:
        parts = self.name.split(".") if isinstance(self.name, str) else [None]
        if not 1 <= len(parts) <= 2 or not all(isinstance(p, str) and _NAME.fullmatch(p) for p in parts):
            raise InvalidArgument(
                f"an outbox table is a lower-case identifier (or schema.table) of at most 41 "
                f"characters each, not {self.name!r}")

    @property
    def quoted(self) -> str:
        return ".".join(f'"{p}"' for p in self.name.split("."))

    @property
    def channel(self) -> str:
        """The NOTIFY channel a commit of rows signals (the table's name, dots as ``__``)."""
        return self.name.replace(".", "__")

    @property
    def namespace(self) -> str:
        """The namespace of the job ids derived from this table's rows (``derive_id``)."""
        return f"echomq.outbox:{self.name}"

    def install_sql(self) -> str:
        """Idempotent DDL: the table, the NOTIFY trigger function and the trigger."""
        t, fn = self.quoted, self.quoted[:-1] + '_notify"'
        trigger = f'"{self.name.split(".")[-1]}_notify"'
        return f"""
CREATE TABLE IF NOT EXISTS {t} (
    id bigserial PRIMARY KEY,
    queue text NOT NULL,
    payload bytea NOT NULL,
    options jsonb NOT NULL DEFAULT '{{}}'::jsonb,
    created timestamptz NOT NULL DEFAULT clock_timestamp(),
    error text,
    job_id text
);
ALTER TABLE {t} ADD COLUMN IF NOT EXISTS job_id text;
CREATE OR REPLACE FUNCTION {fn}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('{self.channel}', '');
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS {trigger} ON {t};
CREATE TRIGGER {trigger} AFTER INSERT ON {t}
    FOR EACH STATEMENT EXECUTE FUNCTION {fn}();
"""

    def insert_sql(self) -> str:
        return (f"INSERT INTO {self.quoted} (queue, payload, options, job_id) VALUES (%s, %s, %s, %s)"
                " RETURNING id")

    def claim_sql(self) -> str:
        """The next rows no other relay holds, at least ``%s`` ms old (the relay's ``min_age_ms``),
        oldest first, locked until the batch ends."""
        return (f"SELECT id, queue, payload, options, "
                f"(extract(epoch FROM created) * 1000)::bigint, job_id FROM {self.quoted} "
                "WHERE error IS NULL AND created <= clock_timestamp() - %s * interval '1 millisecond'"
                " ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED")

    def delete_sql(self) -> str:
        return f"DELETE FROM {self.quoted} WHERE id = ANY(%s)"

    def refuse_sql(self) -> str:
        return f"UPDATE {self.quoted} SET error = %s WHERE id = %s"
