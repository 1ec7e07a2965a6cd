"""The relay's view of the wallet: charged guesses not yet admitted onto the queue.

The relay closes the gap between the PostgreSQL commit of a charge and the
admission of its job onto the ``cm`` lane: a charged guess with
``admitted_at IS NULL`` is (re-)admitted by its JOB id, which the queue refuses
as a duplicate if it is already there, then marked with :func:`mark_admitted`.
Both calls are retried on a transient failure and idempotent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from psycopg_pool import AsyncConnectionPool

from codemojex.wallet.tx import retried, transaction

__all__ = ["PendingGuess", "StoredGuess", "get_guess", "mark_admitted", "mark_notified", "unadmitted"]


@dataclass(frozen=True, slots=True)
class PendingGuess:
    """A committed (charged) guess whose job is not yet admitted onto the queue."""

    id: str
    round_id: str
    player: str
    emojis: tuple[str, ...]


@retried
async def unadmitted(pool: AsyncConnectionPool, *, limit: int = 100) -> list[PendingGuess]:
    """Up to ``limit`` charged guesses with ``admitted_at IS NULL``, in charge order."""
    async with transaction(pool) as conn:
        cur = await conn.execute(
            "SELECT id, round_id, player_id, emojis FROM guesses"
            " WHERE admitted_at IS NULL ORDER BY seq LIMIT %s",
            (limit,),
        )
        return [PendingGuess(str(i), str(r), str(p), tuple(e)) for i, r, p, e in await cur.fetchall()]


@retried
async def mark_admitted(pool: AsyncConnectionPool, ids: Sequence[str]) -> int:
    """Mark guesses admitted; returns how many changed (already marked ones are skipped)."""
    if not ids:
        return 0
    async with transaction(pool) as conn:
        cur = await conn.execute(
            "UPDATE guesses SET admitted_at = now() WHERE id = ANY(%s) AND admitted_at IS NULL",
            (list(ids),),
        )
        return cur.rowcount


@dataclass(frozen=True, slots=True)
class StoredGuess:
    """A charged guess as recorded: who, where, what, for how much, and whether admitted."""

    id: str
    round_id: str
    player: str
    emojis: tuple[str, ...]
    charged: int
    admitted: bool


@retried
async def get_guess(pool: AsyncConnectionPool, guess_id: str) -> StoredGuess | None:
    """The stored guess ``guess_id``, or None. ``admitted``: its admission is done (marked,
    and no row of it waits in the game's outbox for the relay)."""
    async with transaction(pool) as conn:
        cur = await conn.execute(
            "SELECT id, round_id, player_id, emojis, charged, admitted_at IS NOT NULL"
            " AND NOT EXISTS (SELECT 1 FROM cm_outbox o WHERE o.job_id = guesses.id)"
            " FROM guesses WHERE id = %s",
            (guess_id,),
        )
        row = await cur.fetchone()
    if row is None:
        return None
    i, r, p, e, c, a = row
    return StoredGuess(str(i), str(r), str(p), tuple(e), int(c), bool(a))


@retried
async def mark_notified(pool: AsyncConnectionPool, guess_id: str) -> bool:
    """Stamp the delivery of ``guess_id``'s score notification (the first one counts).
    True if this call stamped it."""
    async with transaction(pool) as conn:
        cur = await conn.execute("UPDATE guesses SET notified_at = now() WHERE id = %s"
                                 " AND notified_at IS NULL RETURNING id", (guess_id,))
        return await cur.fetchone() is not None
