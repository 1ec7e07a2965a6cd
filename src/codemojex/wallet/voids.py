"""An operator's void: every charge of a round refunded by compensating movements.

:func:`void_round` takes the round (row lock, ``update``: the one lock order, then its
players), closes it if it is open (no charge lands after that), refunds each player the
sum of their charges in it by one movement from the round's pot (kind ``payout``, ref
``void:<round>:<player>``, a ``payouts`` row like any other, so the audit's checks hold:
the pot is paid out whole, the ledger sums to zero), records the round in
``voided_rounds`` and settles it. Nothing is updated in the money tables and nothing is
deleted. A round already settled is refused (its pot was paid to its winners); voiding
a voided round returns what it refunded, changing nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from psycopg_pool import AsyncConnectionPool

from codemojex.wallet.locks import lock
from codemojex.wallet.money import pay_locked
from codemojex.wallet.results import Paid
from codemojex.wallet.tx import retried, transaction

__all__ = ["Voided", "is_voided", "void_ref", "void_round"]


@dataclass(frozen=True, slots=True)
class Voided:
    """``state``: ``voided`` (by this call), ``already`` (voided before), ``settled``
    (refused: paid to its winners), ``unknown`` (no such round)."""

    round_id: str
    state: str
    refunds: dict[str, int]

    @property
    def refunded(self) -> int:
        return sum(self.refunds.values())


def void_ref(round_id: str, player: str) -> str:
    return f"void:{round_id}:{player}"


@retried
async def void_round(pool: AsyncConnectionPool, round_id: str, reason: str = "") -> Voided:
    """Void ``round_id`` (see the module docstring). Idempotent."""
    async with transaction(pool) as conn:
        rnd = (await lock(conn, round_id=round_id, round_mode="update")).round
        if rnd is None:
            return Voided(round_id, "unknown", {})
        cur = await conn.execute(
            "SELECT y.player_id, y.amount FROM payouts y JOIN voided_rounds v ON v.round_id = y.round_id"
            " WHERE y.round_id = %s", (round_id,))
        before = {str(p): int(a) for p, a in await cur.fetchall()}
        cur = await conn.execute("SELECT 1 FROM voided_rounds WHERE round_id = %s", (round_id,))
        if await cur.fetchone() is not None:
            return Voided(round_id, "already", before)
        if rnd.state == "settled":
            return Voided(round_id, "settled", {})
        if rnd.state == "open":
            await conn.execute(
                "UPDATE rounds SET state = 'closed', pot = (SELECT coalesce(sum(amount), 0)"
                " FROM ledger WHERE account = 'round:' || rounds.id) WHERE id = %s", (round_id,))
        cur = await conn.execute(
            "SELECT player_id, sum(charged) FROM guesses WHERE round_id = %s GROUP BY player_id"
            " HAVING sum(charged) > 0 ORDER BY player_id", (round_id,))
        refunds = {str(p): int(a) for p, a in await cur.fetchall()}
        await lock(conn, players=list(refunds))  # after the round: the one order
        for player, coins in refunds.items():
            result = await pay_locked(conn, round_id, player, coins, void_ref(round_id, player))
            assert isinstance(result, Paid), result  # under the round lock nobody else pays it
        await conn.execute(
            "INSERT INTO voided_rounds (round_id, reason, refunded) VALUES (%s, %s, %s)",
            (round_id, reason[:200], sum(refunds.values())))
        await conn.execute("UPDATE rounds SET state = 'settled', settled_at = now() WHERE id = %s",
                           (round_id,))
        return Voided(round_id, "voided", refunds)


@retried
async def is_voided(pool: AsyncConnectionPool, round_id: str) -> bool:
    async with transaction(pool, read_only=True) as conn:
        cur = await conn.execute("SELECT 1 FROM voided_rounds WHERE round_id = %s", (round_id,))
        return await cur.fetchone() is not None
