"""Settlement: the sealed pass (:func:`codemojex.domain.payouts.settle`) in one transaction.

The round must be ``closed`` with every guess scored. The transaction locks
through :func:`codemojex.wallet.locks.lock` only, in the wallet's one order: the
round (``update``) first; then it reads the scored guesses in the server's order
(``seq``), computes the split of the pot at close, and locks every winner at
once, in id order. Every payout is made with ref ``payout:<round>:<player>``,
and the round becomes ``settled``. A re-run finds it settled and returns the
stored payouts: it pays identically and never twice.
"""

from __future__ import annotations

from psycopg_pool import AsyncConnectionPool

from codemojex.domain.errors import Reason
from codemojex.domain.payouts import Payout, ScoredGuess, payout_ref, settle
from codemojex.wallet.locks import lock
from codemojex.wallet.money import pay_locked
from codemojex.wallet.results import NotReady, Paid, RoundRefused
from codemojex.wallet.tx import retried, transaction

__all__ = ["settle_round"]


@retried
async def settle_round(
    pool: AsyncConnectionPool, round_id: str
) -> tuple[Payout, ...] | NotReady | RoundRefused:
    """Settle a closed, fully scored round (see the module docstring). Idempotent."""
    async with transaction(pool) as conn:
        rnd = (await lock(conn, round_id=round_id, round_mode="update")).round
        if rnd is None:
            return RoundRefused(round_id, Reason.NO_ROUND)
        if rnd.state == "settled":
            cur = await conn.execute(
                "SELECT player_id, amount, guess_id FROM payouts WHERE round_id = %s ORDER BY player_id",
                (round_id,),
            )
            return tuple(Payout(str(p), int(a), str(g)) for p, a, g in await cur.fetchall())
        cur = await conn.execute(
            "SELECT count(*) FILTER (WHERE score IS NULL), coalesce(sum(charged), 0)"
            " FROM guesses WHERE round_id = %s",
            (round_id,),
        )
        counts = await cur.fetchone()
        assert counts is not None
        unscored, pot = int(counts[0]), int(counts[1])
        if rnd.state != "closed" or unscored:
            return NotReady(round_id, rnd.state, unscored)
        cur = await conn.execute(
            "SELECT id, player_id, score, seq FROM guesses WHERE round_id = %s ORDER BY seq", (round_id,)
        )
        guesses = [ScoredGuess(str(i), str(p), int(s), int(q)) for i, p, s, q in await cur.fetchall()]
        payouts = settle(pot, guesses)
        await lock(conn, players=[p.player for p in payouts])  # after the round: the one order
        for p in payouts:
            result = await pay_locked(conn, round_id, p.player, p.amount, payout_ref(round_id, p.player),
                                      p.guess_id)
            # Under the round lock in state 'closed' nobody else pays this round.
            assert isinstance(result, Paid), result
        await conn.execute(
            "UPDATE rounds SET state = 'settled', settled_at = now() WHERE id = %s", (round_id,)
        )
        return payouts
