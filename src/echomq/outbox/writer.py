"""Admit jobs inside the caller's own PostgreSQL transaction (psycopg 3, blocking and asyncio).

    with conn.transaction():                      # the application's transaction
        conn.execute("UPDATE orders SET paid = true WHERE id = %s", (order_id,))
        outbox.add(conn, "invoices", payload)      # a row of the outbox, same transaction

The job exists if and only if that transaction commits: a rollback takes the row with it,
and a relay (:class:`echomq.outbox.OutboxRelay`, ``echomq relay``) admits each committed row
to its queue. Every argument is checked before the INSERT (:class:`OutboxJob`); a failure of
the database comes back as :class:`OutboxDatabaseError` (or :class:`ConfigurationError` when
the table is missing), never as a psycopg exception, and leaves the caller's transaction
failed, as any failed statement does.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import errors as pg_errors

from echomq.core.errors import ConfigurationError, EchoMQError, InvalidArgument
from echomq.outbox.jobs import OutboxJob
from echomq.outbox.schema import DEFAULT_TABLE, OutboxTable

__all__ = ["Outbox", "OutboxDatabaseError"]

_MANY = ("INSERT INTO {t} (queue, payload, options, job_id) "
         "SELECT * FROM unnest(%s::text[], %s::bytea[], %s::jsonb[], %s::text[]) RETURNING id")


class OutboxDatabaseError(EchoMQError):
    """PostgreSQL refused or failed an outbox statement (the message names the cause)."""


@contextmanager
def _mapped(table: OutboxTable) -> Iterator[None]:
    """psycopg's exceptions as EchoMQ's, at this one edge."""
    try:
        yield
    except pg_errors.UndefinedTable:
        raise ConfigurationError(
            f"no outbox table {table.name}: create it with echomq.outbox.Outbox.install "
            "(or echomq relay --install)") from None
    except psycopg.Error as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise OutboxDatabaseError(f"outbox {table.name}: {first}") from exc


def _job(job: OutboxJob | None, queue: str | None, payload: bytes | None,
         options: dict[str, Any]) -> OutboxJob:
    if job is not None:
        if not isinstance(job, OutboxJob):
            raise InvalidArgument(f"expected an OutboxJob, not {type(job).__name__}")
        return job
    return OutboxJob(queue=queue, payload=payload, **options)  # type: ignore[arg-type]


def _columns(jobs: Sequence[OutboxJob]) -> tuple[list[str], list[bytes], list[str], list[str | None]]:
    for job in jobs:
        if not isinstance(job, OutboxJob):
            raise InvalidArgument(f"expected OutboxJob items, not {type(job).__name__}")
    return ([j.queue for j in jobs], [j.payload for j in jobs], [j.options_json() for j in jobs],
            [j.job_id for j in jobs])


class Outbox:
    """The outbox table ``table`` (default ``echomq_outbox``); holds no connection.

    Each method takes the caller's connection and runs in the transaction open on it (with
    ``autocommit=True`` there is none: the row commits at once)."""

    def __init__(self, table: str = DEFAULT_TABLE) -> None:
        self.table = OutboxTable(table)

    # ------------------------------------------------------------ blocking
    def install(self, conn: psycopg.Connection[Any]) -> None:
        """Create the table and its NOTIFY trigger if absent (idempotent, safe to race)."""
        with _mapped(self.table), conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.table.name,))
            conn.execute(self.table.install_sql())

    def add(self, conn: psycopg.Connection[Any], queue: str | None = None,
            payload: bytes | None = None, *, job: OutboxJob | None = None, **options: Any) -> int:
        """Write one job into the outbox in ``conn``'s transaction; returns its row id.

        ``options`` are :meth:`echomq.AsyncQueue.admit`'s (``lane``, ``delay_ms``,
        ``serial``, ``max_attempts``, ``priority``, ``timeout_ms``); or give ``job=``."""
        one = _job(job, queue, payload, options)
        with _mapped(self.table):
            row = conn.execute(self.table.insert_sql(),
                               (one.queue, one.payload, one.options_json(), one.job_id)).fetchone()
        assert row is not None
        return int(row[0])

    def add_many(self, conn: psycopg.Connection[Any], jobs: Sequence[OutboxJob]) -> list[int]:
        """Write many jobs in one statement in ``conn``'s transaction; their row ids."""
        cols = _columns(jobs)
        if not jobs:
            return []
        with _mapped(self.table):
            rows = conn.execute(_MANY.format(t=self.table.quoted), cols).fetchall()
        return [int(r[0]) for r in rows]

    # ------------------------------------------------------------ asyncio
    async def install_async(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """:meth:`install` on an asyncio connection."""
        with _mapped(self.table):
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.table.name,))
                await conn.execute(self.table.install_sql())

    async def add_async(self, conn: psycopg.AsyncConnection[Any], queue: str | None = None,
                        payload: bytes | None = None, *, job: OutboxJob | None = None,
                        **options: Any) -> int:
        """:meth:`add` on an asyncio connection."""
        one = _job(job, queue, payload, options)
        with _mapped(self.table):
            cur = await conn.execute(self.table.insert_sql(),
                                     (one.queue, one.payload, one.options_json(), one.job_id))
            row = await cur.fetchone()
        assert row is not None
        return int(row[0])

    async def add_many_async(self, conn: psycopg.AsyncConnection[Any],
                             jobs: Sequence[OutboxJob]) -> list[int]:
        """:meth:`add_many` on an asyncio connection."""
        cols = _columns(jobs)
        if not jobs:
            return []
        with _mapped(self.table):
            cur = await conn.execute(_MANY.format(t=self.table.quoted), cols)
            rows = await cur.fetchall()
        return [int(r[0]) for r in rows]
