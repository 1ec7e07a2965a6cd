"""Audit queries over the wallet, and the relay's view of guesses not yet admitted.

The relay closes the gap between the PostgreSQL commit of a charge and the
admission of its job onto the ``cm`` lane: a charged guess with
``admitted_at IS NULL`` is (re-)admitted by its JOB id, which the queue refuses
as a duplicate if it is already there, then marked with :func:`mark_admitted`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from psycopg_pool import AsyncConnectionPool

__all__ = ["Audit", "PendingGuess", "audit", "mark_admitted", "unadmitted"]


@dataclass(frozen=True, slots=True)
class Audit:
    """Invariants of the books. :attr:`ok` is True when every one holds."""

    ledger_sum: int
    unbalanced_refs: int  # movements whose legs do not sum to zero
    negative_balances: int
    balance_mismatches: int  # players whose balance differs from their ledger legs
    pot_mismatches: int  # closed rounds whose pot differs from their ledger legs
    charged_guesses: int
    scored_guesses: int
    duplicate_payouts: int  # (round, player) pairs paid more than once

    @property
    def ok(self) -> bool:
        return (
            self.ledger_sum == 0
            and self.unbalanced_refs == 0
            and self.negative_balances == 0
            and self.balance_mismatches == 0
            and self.pot_mismatches == 0
            and self.duplicate_payouts == 0
        )


_AUDIT = """
SELECT
  (SELECT coalesce(sum(amount), 0) FROM ledger),
  (SELECT count(*) FROM (SELECT ref FROM ledger GROUP BY ref HAVING sum(amount) <> 0) u),
  (SELECT count(*) FROM players WHERE balance < 0),
  (SELECT count(*) FROM players p WHERE p.balance <> coalesce(
      (SELECT sum(amount) FROM ledger l WHERE l.account = 'player:' || p.id), 0)),
  (SELECT count(*) FROM rounds r WHERE r.state <> 'open' AND r.pot <> coalesce(
      (SELECT sum(amount) FROM ledger l WHERE l.account = 'round:' || r.id), 0)),
  (SELECT count(*) FROM guesses),
  (SELECT count(*) FROM guesses WHERE score IS NOT NULL),
  (SELECT count(*) FROM (SELECT 1 FROM movements m
      JOIN ledger d ON d.ref = m.ref AND d.amount < 0
      JOIN ledger c ON c.ref = m.ref AND c.amount > 0
      WHERE m.kind = 'payout' GROUP BY d.account, c.account HAVING count(*) > 1) x)
"""


async def audit(pool: AsyncConnectionPool) -> Audit:
    """Run every audit query in one snapshot (REPEATABLE READ, read only)."""
    async with pool.connection() as conn, conn.transaction():
        # One snapshot for every count; read only, so an audit can never write.
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        cur = await conn.execute(_AUDIT)
        row = await cur.fetchone()
    assert row is not None
    return Audit(*(int(v) for v in row))


@dataclass(frozen=True, slots=True)
class PendingGuess:
    """A committed (charged) guess whose job is not yet admitted onto the queue."""

    id: str
    round_id: str
    player: str
    emojis: tuple[str, ...]


async def unadmitted(pool: AsyncConnectionPool, *, limit: int = 100) -> list[PendingGuess]:
    """Up to ``limit`` charged guesses with ``admitted_at IS NULL``, oldest id first."""
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT id, round_id, player_id, emojis FROM guesses"
            " WHERE admitted_at IS NULL ORDER BY id LIMIT %s",
            (limit,),
        )
        return [PendingGuess(str(i), str(r), str(p), tuple(e)) for i, r, p, e in await cur.fetchall()]


async def mark_admitted(pool: AsyncConnectionPool, ids: Sequence[str]) -> int:
    """Mark guesses admitted; returns how many changed (already marked ones are skipped)."""
    if not ids:
        return 0
    async with pool.connection() as conn:
        cur = await conn.execute(
            "UPDATE guesses SET admitted_at = now() WHERE id = ANY(%s) AND admitted_at IS NULL",
            (list(ids),),
        )
        return cur.rowcount
