"""The relay: committed outbox rows onto their queues, each once, in commit order.

One batch (:meth:`OutboxRelay.relay_once`) is one PostgreSQL transaction:

1. **claim**: ``SELECT ... ORDER BY id LIMIT batch FOR UPDATE SKIP LOCKED``: the oldest
   committed rows no other relay holds (several relays share the work, none waits);
2. **admit**: every row onto its queue with the batch path (``admit_many``, hence
   ``enqueue_batch``; rows with a delay or their own attempt limit as pipelined ``admit``
   calls), each under the job id derived from the row (:func:`job_id_of`);
3. **delete** the rows the queue took (ENQUEUED, or DUPLICATE: a relay that died after
   admitting them had got that far), mark the ones it refused for good (``error``), and
   **commit**.

A relay killed anywhere in there leaves its transaction to roll back: the rows come back,
the next relay admits them under the same ids, and the queue refuses each it already holds
as a duplicate. So a row's job is admitted once, provided the queue still keeps the job's
row when the row comes back (``keep_done_ms``, one hour by default; a relay restarted
within it). A transient refusal (the server at its memory limit, unreachable, busy) leaves
the row in the outbox for the next batch: rows wait, nothing is lost.

The relay sleeps on ``LISTEN`` (the table's trigger notifies on commit) with a poll every
``poll_s`` as the fallback, and reconnects to either server after a failure with a growing
pause (docs/decisions/0034-outbox.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

from echomq import protocol as p
from echomq.client._async.queue import AsyncQueue
from echomq.client._async.seam import ScriptConnector
from echomq.core.errors import ConfigurationError, EchoMQError, InvalidArgument
from echomq.core.model import QueueOptions, Verdict
from echomq.outbox.jobs import OutboxJob, job_id_of
from echomq.outbox.schema import DEFAULT_TABLE, OutboxTable
from echomq.outbox.writer import OutboxDatabaseError

__all__ = ["CRASH_POINTS", "BatchReport", "OutboxRelay"]

log = logging.getLogger("echomq.outbox")

CRASH_POINTS = ("claimed", "admitting", "admitted", "deleted", "committed")
"""Where a test may have the relay kill itself (SIGKILL, ``crash_at=``): rows claimed and
nothing admitted; half the batch admitted; all admitted, before the DELETE; deleted, before
the COMMIT; committed, before the next batch."""

_MAX_PAUSE_S = 2.0
_DB_ERRORS = (psycopg.OperationalError, psycopg.InterfaceError)


@dataclass(slots=True)
class BatchReport:
    """What one batch did: rows claimed, admitted (ENQUEUED), found already admitted
    (DUPLICATE), left waiting (a transient refusal) and refused for good."""

    claimed: int = 0
    admitted: int = 0
    duplicates: int = 0
    waiting: int = 0
    refused: int = 0
    errors: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Row:
    id: int
    job: OutboxJob | None
    job_id: str
    problem: str = ""


def _permanent(exc: EchoMQError) -> bool:
    """A refusal that retrying cannot change (a value out of range, a queue of another
    protocol version); any other (memory limit, busy, unreachable) is worth waiting out."""
    return isinstance(exc, InvalidArgument | ConfigurationError)


class OutboxRelay:
    """Moves committed rows of the outbox ``table`` at ``database_url`` onto their queues
    on ``connector`` (an :class:`~echomq.AsyncConnector` or cluster connector).

    ``batch`` rows per transaction (1..10,000); ``poll_s`` the longest sleep without a
    notification; ``queue_options`` the :class:`QueueOptions` of a queue by name (default
    options otherwise); ``crash_at`` one of :data:`CRASH_POINTS` to have the process kill
    itself there (fault tests only). ``min_age_ms``: take only rows at least this old, and
    poll (every ``poll_s``) instead of waking on each commit: for a writer that admits its
    own rows at once after the commit (a fast path) and deletes them later, so the relay
    only picks up what a writer that died left behind (no second admission of every row).
    Use :meth:`run` as a service, :meth:`drain` to empty
    the outbox once, and ``aclose`` (or ``async with``) to release the connections.
    """

    def __init__(self, database_url: str, connector: ScriptConnector, *,
                 table: str = DEFAULT_TABLE, batch: int = 500, poll_s: float = 1.0,
                 queue_options: Mapping[str, QueueOptions] | None = None,
                 crash_at: str | None = None, min_age_ms: int = 0) -> None:
        p.check_int("batch", batch, 1, 10_000)
        if not isinstance(poll_s, int | float) or not 0.01 <= poll_s <= 3600:
            raise InvalidArgument(f"poll_s must be 0.01..3600 seconds, not {poll_s!r}")
        if crash_at is not None and crash_at not in CRASH_POINTS:
            raise InvalidArgument(f"crash_at must be one of {CRASH_POINTS}, not {crash_at!r}")
        self.url = database_url
        self.connector = connector
        self.table = OutboxTable(table)
        self.batch = batch
        self.poll_s = float(poll_s)
        self.crash_at = crash_at
        self.min_age_ms = p.check_int("min_age_ms", min_age_ms, 0, 3_600_000)
        self._options = dict(queue_options or {})
        self._queues: dict[str, AsyncQueue] = {}
        self._work: psycopg.AsyncConnection[Any] | None = None
        self._listen: psycopg.AsyncConnection[Any] | None = None
        self.totals = BatchReport()

    # ------------------------------------------------------------ connections
    async def _connection(self) -> psycopg.AsyncConnection[Any]:
        if self._work is None or self._work.closed:
            try:
                self._work = await psycopg.AsyncConnection.connect(self.url, connect_timeout=5)
            except psycopg.Error as exc:
                raise OutboxDatabaseError(f"outbox relay: PostgreSQL refused the connection: "
                                          f"{(str(exc).strip().splitlines() or ['?'])[0]}") from exc
        return self._work

    async def _listener(self) -> psycopg.AsyncConnection[Any]:
        if self._listen is None or self._listen.closed:
            conn = await psycopg.AsyncConnection.connect(self.url, autocommit=True, connect_timeout=5)
            await conn.execute(f'LISTEN "{self.table.channel}"')
            self._listen = conn
        return self._listen

    async def _drop(self) -> None:
        """Close both connections (an open transaction rolls back: its rows come back)."""
        for conn in (self._work, self._listen):
            if conn is not None:
                with contextlib.suppress(Exception):
                    await conn.close()
        self._work = self._listen = None

    async def aclose(self) -> None:
        await self._drop()

    async def __aenter__(self) -> OutboxRelay:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _queue(self, name: str) -> AsyncQueue:
        queue = self._queues.get(name)
        if queue is None:
            queue = self._queues[name] = AsyncQueue(self.connector, name,
                                                    options=self._options.get(name))
        return queue

    def _crash(self, point: str) -> None:
        if self.crash_at == point:
            os.kill(os.getpid(), signal.SIGKILL)

    # ------------------------------------------------------------------ batch
    async def relay_once(self) -> BatchReport:
        """One batch: claim, admit, delete, commit (module docstring). Raises
        OutboxDatabaseError when PostgreSQL fails (the batch rolled back), an EchoMQError
        when the queue's server fails as a whole (likewise); rows are never lost."""
        conn = await self._connection()
        report = BatchReport()
        try:
            # Pipeline mode: BEGIN goes out with the claim, DELETE with COMMIT: two round
            # trips to PostgreSQL per batch instead of four (latency, bench/outbox_latency.py).
            async with conn.pipeline() as pipe, conn.transaction():
                cur = await conn.execute(self.table.claim_sql(), (self.min_age_ms, self.batch))
                rows = [self._row(r) for r in await cur.fetchall()]
                report.claimed = len(rows)
                if not rows:
                    return report
                self._crash("claimed")
                verdicts = await self._admit(rows)
                self._crash("admitted")
                done, refused = self._sort(rows, verdicts, report)
                if done:
                    await conn.execute(self.table.delete_sql(), (done,))
                for row_id, problem in refused:
                    await conn.execute(self.table.refuse_sql(), (problem[:1000], row_id))
                if self.crash_at == "deleted":
                    await pipe.sync()  # the DELETE has run on the server; the COMMIT has not
                self._crash("deleted")
        except psycopg.Error as exc:
            await self._drop()
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise OutboxDatabaseError(f"outbox relay: {first}") from exc
        self._crash("committed")
        for name in ("claimed", "admitted", "duplicates", "waiting", "refused"):
            setattr(self.totals, name, getattr(self.totals, name) + getattr(report, name))
        return report

    def _row(self, record: Sequence[Any]) -> _Row:
        row_id, queue, payload, options, created_ms, own_id = record
        job_id = own_id or job_id_of(self.table.namespace, int(row_id), int(created_ms))
        try:
            return _Row(int(row_id), OutboxJob.from_row(queue, payload, options, own_id), job_id)
        except (EchoMQError, TypeError) as exc:  # a row no checked insert wrote
            return _Row(int(row_id), None, job_id, f"{type(exc).__name__}: {exc}")

    async def _admit(self, rows: list[_Row]) -> list[Verdict | EchoMQError | None]:
        """One verdict per row (None for a row refused before admission), rows of each
        queue in their order."""
        if self.crash_at == "admitting":  # the first half admitted, then the kill
            await self._admit_rows(rows[: max(1, len(rows) // 2)])
            self._crash("admitting")
        return await self._admit_rows(rows)

    async def _admit_rows(self, rows: list[_Row]) -> list[Verdict | EchoMQError | None]:
        out: list[Verdict | EchoMQError | None] = [None] * len(rows)
        by_queue: dict[str, list[int]] = {}
        for i, row in enumerate(rows):
            if row.job is not None:
                by_queue.setdefault(row.job.queue, []).append(i)
        results = await asyncio.gather(
            *(self._admit_queue(self._queue(q), [rows[i] for i in at]) for q, at in by_queue.items()))
        for at, verdicts in zip(by_queue.values(), results, strict=True):
            for i, verdict in zip(at, verdicts, strict=True):
                out[i] = verdict
        return out

    async def _admit_queue(self, queue: AsyncQueue, rows: list[_Row]) -> list[Verdict | EchoMQError]:
        """Consecutive rows with the same batch options as one ``admit_many``; rows with a
        delay or an attempt limit as pipelined ``admit`` calls; in the rows' order."""
        out: list[Verdict | EchoMQError] = []
        i = 0
        while i < len(rows):
            first = rows[i].job
            assert first is not None
            if first.delay_ms or first.max_attempts is not None:
                calls = []
                while i < len(rows):
                    j = rows[i].job
                    assert j is not None
                    if not (j.delay_ms or j.max_attempts is not None):
                        break
                    calls.append(queue.admission.call(rows[i].job_id, j.payload, j.lane, j.delay_ms,
                                                      j.serial, j.max_attempts, j.priority,
                                                      j.timeout_ms))
                    i += 1
                out += [p.decode_verdict(r) for r in await queue.admission.pipeline(calls)]
                continue
            key = (first.serial, first.priority, first.timeout_ms)
            items: list[Any] = []
            while i < len(rows):
                j = rows[i].job
                assert j is not None
                if j.delay_ms or j.max_attempts is not None or (j.serial, j.priority, j.timeout_ms) != key:
                    break
                items.append((rows[i].job_id, j.payload) if j.lane is None
                             else (rows[i].job_id, j.payload, j.lane))
                i += 1
            out += await queue.admit_many(items, serial=key[0], priority=key[1], timeout_ms=key[2])
        return out

    def _sort(self, rows: list[_Row], verdicts: list[Verdict | EchoMQError | None],
              report: BatchReport) -> tuple[list[int], list[tuple[int, str]]]:
        done: list[int] = []
        refused: list[tuple[int, str]] = []
        for row, verdict in zip(rows, verdicts, strict=True):
            if verdict is Verdict.ENQUEUED:
                report.admitted += 1
                done.append(row.id)
            elif verdict is Verdict.DUPLICATE:
                report.duplicates += 1
                done.append(row.id)
            elif verdict is None or verdict is Verdict.KIND or (
                    isinstance(verdict, EchoMQError) and _permanent(verdict)):
                problem = row.problem or (f"{type(verdict).__name__}: {verdict}"
                                          if isinstance(verdict, EchoMQError) else "refused: KIND")
                report.refused += 1
                refused.append((row.id, problem))
                log.error("outbox row %d refused for good (kept with its error): %s", row.id, problem)
            else:
                report.waiting += 1
                if len(report.errors) < 3:
                    report.errors.append(f"{type(verdict).__name__}: {verdict}")
        return done, refused

    # -------------------------------------------------------------- services
    async def drain(self) -> BatchReport:
        """Batches until the outbox holds no row this relay can take now; the sum.
        Stops early (rows left waiting) when a batch admits nothing."""
        total = BatchReport()
        while True:
            report = await self.relay_once()
            for name in ("claimed", "admitted", "duplicates", "waiting", "refused"):
                setattr(total, name, getattr(total, name) + getattr(report, name))
            total.errors += report.errors
            if report.claimed < self.batch or report.waiting == report.claimed:
                return total

    async def wait(self, timeout: float) -> bool:  # noqa: ASYNC109 (a pause, not a deadline)
        """Sleep until a commit of rows is notified (True) or ``timeout`` seconds passed."""
        listener = await self._listener()
        async for _ in listener.notifies(timeout=timeout, stop_after=1):
            return True
        return False

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Relay until ``stop`` is set (or the task is cancelled): batches while there are
        rows, then sleep on LISTEN (``poll_s`` at most); after a failure of either server,
        pause (50 ms growing to 2 s) and go on. Never ends on a server's failure."""
        stop = stop or asyncio.Event()
        pause = 0.05
        while not stop.is_set():
            try:
                if not self.min_age_ms:
                    await self._listener()  # listening before the first look: no commit is missed
                report = await self.relay_once()
                if report.waiting:
                    log.warning("outbox: %d row(s) wait: %s", report.waiting, "; ".join(report.errors))
                    await asyncio.sleep(pause)
                    pause = min(_MAX_PAUSE_S, pause * 2)
                    continue
                pause = 0.05
                if report.claimed < self.batch and self.min_age_ms:
                    with contextlib.suppress(TimeoutError):  # rows it may take come of age
                        await asyncio.wait_for(stop.wait(), self.poll_s)
                elif report.claimed < self.batch:
                    await self.wait(self.poll_s)
            except (EchoMQError, *_DB_ERRORS) as exc:
                log.warning("outbox relay: %s; again in %.2f s", exc, pause)
                await self._drop()
                await asyncio.sleep(pause)
                pause = min(_MAX_PAUSE_S, pause * 2)
