"""Transactional enqueue: a job exists if and only if the application's transaction commits.

The application writes its jobs into an outbox table in its own PostgreSQL transaction
(:class:`Outbox`, psycopg 3, blocking or asyncio); a relay (:class:`OutboxRelay`, or the
``echomq relay`` command) moves each committed row onto its queue with the batch path,
under a job id derived from the row, so a relay killed at any step admits nothing twice
(docs/decisions/0034-outbox.md). A layer above the client and the runtime, below ops.

    from echomq.outbox import Outbox
    outbox = Outbox()                      # table echomq_outbox
    outbox.install(conn)                   # once: the table and its NOTIFY trigger
    with conn.transaction():
        ...                                # the application's writes
        outbox.add(conn, "emails", b"...", lane="user-42")

Needs the ``psycopg`` package (``pip install "echomq[outbox]"``).
"""

from echomq.outbox.jobs import OutboxJob, job_id_of
from echomq.outbox.relay import CRASH_POINTS, BatchReport, OutboxRelay
from echomq.outbox.schema import DEFAULT_TABLE, OutboxTable
from echomq.outbox.writer import Outbox, OutboxDatabaseError

__all__ = ["CRASH_POINTS", "DEFAULT_TABLE", "BatchReport", "Outbox", "OutboxDatabaseError", "OutboxJob",
           "OutboxRelay", "OutboxTable", "job_id_of"]
