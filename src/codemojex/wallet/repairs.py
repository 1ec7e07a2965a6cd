"""The reconciler's memory in PostgreSQL (migration ``0005_reconcile``): how often each dead
job was requeued, and which it gave up on, when and why.

Every call is one transaction, retried on a transient failure (:func:`~.tx.retried`).
"""

from __future__ import annotations

from psycopg_pool import AsyncConnectionPool

from codemojex.wallet.tx import retried, transaction

__all__ = ["count_requeues", "give_up", "given_up", "requeue_counts"]


@retried
async def requeue_counts(pool: AsyncConnectionPool, queue: str,
                         job_ids: list[str]) -> dict[str, tuple[int, bool]]:
    """(requeues so far, given up) of each of ``job_ids`` the reconciler has seen on ``queue``."""
    async with transaction(pool) as conn:
        cur = await conn.execute("SELECT job_id, requeues, gave_up_at IS NOT NULL FROM reconcile_jobs"
                                 " WHERE queue = %s AND job_id = ANY(%s)", (queue, job_ids))
        return {str(i): (int(n), bool(g)) for i, n, g in await cur.fetchall()}


@retried
async def count_requeues(pool: AsyncConnectionPool, queue: str, job_ids: list[str]) -> None:
    """One more requeue for each of ``job_ids`` (counted before the requeue: a crash in
    between gives up one requeue early, never requeues past the bound)."""
    async with transaction(pool) as conn:
        await conn.execute(
            "INSERT INTO reconcile_jobs (queue, job_id, requeues) SELECT %s, j, 1 FROM unnest(%s::text[]) j"
            " ON CONFLICT (queue, job_id) DO UPDATE SET requeues = reconcile_jobs.requeues + 1,"
            " updated_at = now()", (queue, job_ids))


@retried
async def give_up(pool: AsyncConnectionPool, queue: str, jobs: list[tuple[str, str]]) -> list[str]:
    """Record that the reconciler gave up on each (job id, cause); returns the ids given up
    by this call (an id given up before is not recorded again)."""
    async with transaction(pool) as conn:
        cur = await conn.execute(
            "INSERT INTO reconcile_jobs (queue, job_id, gave_up_at, cause)"
            " SELECT %s, j, now(), c FROM unnest(%s::text[], %s::text[]) AS t(j, c)"
            " ON CONFLICT (queue, job_id) DO UPDATE SET gave_up_at = now(), cause = EXCLUDED.cause,"
            " updated_at = now() WHERE reconcile_jobs.gave_up_at IS NULL RETURNING job_id",
            (queue, [j for j, _ in jobs], [c for _, c in jobs]))
        return [str(r[0]) for r in await cur.fetchall()]


@retried
async def given_up(pool: AsyncConnectionPool) -> dict[str, int]:
    """How many jobs the reconciler gave up on, by queue (every process, every restart)."""
    async with transaction(pool) as conn:
        cur = await conn.execute("SELECT queue, count(*) FROM reconcile_jobs WHERE gave_up_at IS NOT NULL"
                                 " GROUP BY queue ORDER BY queue")
        return {str(q): int(n) for q, n in await cur.fetchall()}
