"""The audit: every invariant of the books, checked in one snapshot.

Each check is one SQL expression counting what is wrong (0 is clean), so a
check can fire: the test suite injects each corruption and sees its check
flagged (``tests/codemojex/test_wallet_audit.py``). :data:`CHECKS` lists them:

==========================  ================================================================
ledger_sum                  coins in all ledger lines (must be 0: double entry)
unbalanced_refs             movements whose lines do not sum to zero
movements_without_lines     movements without exactly two lines (one debit, one credit)
lines_disagree              movements whose lines move another amount than the movement says
lines_without_movement      ledger lines whose ref names no movement
unknown_accounts            lines on an account that is not the house, a player or a round
                            that exists
dangling_references         guesses, locks or payouts naming a round, player, guess or
                            movement that does not exist
negative_balances           players below zero
balance_mismatches          players whose balance differs from their ledger lines
pot_mismatches              closed/settled rounds whose pot differs from their ledger lines
charge_mismatches           guesses without their charge (ref ``guess:<id>``, the charged
                            amount, from the player to the round) or charges without a guess
unsettled_scores            per round, charged vs scored vs settled: settled rounds with
                            unscored guesses, open rounds with payouts
stuck_rounds                rounds past their close plus ``grace`` and not settled
house_mismatch              coins: the house's lines vs minus every grant (the house pays
                            only grants)
coins_unaccounted           coins: granted vs balances + charged - paid (a reconciliation
                            from the tables, not from the ledger)
payout_pot_mismatches       rounds paid more than charged, settled rounds with scored
                            guesses not paid their whole pot, payouts disagreeing with
                            their movement
duplicate_payouts           (round, player) pairs with more than one payout movement
==========================  ================================================================

Values in coins (``ledger_sum``, ``house_mismatch``, ``coins_unaccounted``) are
amounts; every other value is a count of offending rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from psycopg_pool import AsyncConnectionPool

from codemojex.wallet.locks import Conn
from codemojex.wallet.pending import PendingGuess, mark_admitted, unadmitted
from codemojex.wallet.tx import retried, transaction

__all__ = [
    "CHECKS",
    "DEFAULT_GRACE",
    "Audit",
    "PendingGuess",
    "audit",
    "audit_on",
    "mark_admitted",
    "unadmitted",
]

DEFAULT_GRACE = timedelta(minutes=2)  # a round settles within seconds of its close when healthy

CHECKS: dict[str, str] = {
    "ledger_sum": "SELECT coalesce(sum(amount), 0) FROM ledger",
    "unbalanced_refs": "SELECT count(*) FROM (SELECT ref FROM ledger GROUP BY ref HAVING sum(amount) <> 0) u",
    "movements_without_lines": """SELECT count(*) FROM movements m WHERE
        (SELECT count(*) FILTER (WHERE amount < 0) FROM ledger l WHERE l.ref = m.ref) <> 1
        OR (SELECT count(*) FILTER (WHERE amount > 0) FROM ledger l WHERE l.ref = m.ref) <> 1""",
    "lines_disagree": """SELECT count(*) FROM movements m WHERE EXISTS (
        SELECT 1 FROM ledger l WHERE l.ref = m.ref AND abs(l.amount) <> m.amount)""",
    "lines_without_movement": """SELECT count(*) FROM ledger l
        WHERE NOT EXISTS (SELECT 1 FROM movements m WHERE m.ref = l.ref)""",
    "unknown_accounts": """SELECT count(*) FROM (SELECT DISTINCT account FROM ledger) a WHERE NOT (
        account = 'house'
        OR (starts_with(account, 'player:')
            AND EXISTS (SELECT 1 FROM players p WHERE p.id = substr(account, 8)))
        OR (starts_with(account, 'round:')
            AND EXISTS (SELECT 1 FROM rounds r WHERE r.id = substr(account, 7))))""",
    "dangling_references": """SELECT
        (SELECT count(*) FROM guesses g WHERE NOT EXISTS (SELECT 1 FROM rounds r WHERE r.id = g.round_id)
            OR NOT EXISTS (SELECT 1 FROM players p WHERE p.id = g.player_id))
      + (SELECT count(*) FROM locks k WHERE NOT EXISTS (SELECT 1 FROM rounds r WHERE r.id = k.round_id)
            OR NOT EXISTS (SELECT 1 FROM players p WHERE p.id = k.player_id))
      + (SELECT count(*) FROM payouts y WHERE NOT EXISTS (SELECT 1 FROM rounds r WHERE r.id = y.round_id)
            OR NOT EXISTS (SELECT 1 FROM players p WHERE p.id = y.player_id)
            OR NOT EXISTS (SELECT 1 FROM movements m WHERE m.ref = y.ref)
            OR (y.guess_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM guesses g WHERE g.id = y.guess_id)))""",
    "negative_balances": "SELECT count(*) FROM players WHERE balance < 0",
    "balance_mismatches": """SELECT count(*) FROM players p WHERE p.balance <> coalesce(
        (SELECT sum(amount) FROM ledger l WHERE l.account = 'player:' || p.id), 0)""",
    "pot_mismatches": """SELECT count(*) FROM rounds r WHERE r.state <> 'open' AND r.pot <> coalesce(
        (SELECT sum(amount) FROM ledger l WHERE l.account = 'round:' || r.id), 0)""",
    "charge_mismatches": """SELECT
        (SELECT count(*) FROM guesses g WHERE NOT EXISTS (
            SELECT 1 FROM movements m WHERE m.ref = 'guess:' || g.id AND m.kind = 'charge'
              AND m.amount = g.charged)
          OR EXISTS (SELECT 1 FROM ledger l WHERE l.ref = 'guess:' || g.id AND NOT (
              (l.amount < 0 AND l.account = 'player:' || g.player_id)
              OR (l.amount > 0 AND l.account = 'round:' || g.round_id))))
      + (SELECT count(*) FROM movements m WHERE m.kind = 'charge' AND NOT EXISTS (
            SELECT 1 FROM guesses g WHERE 'guess:' || g.id = m.ref))""",
    "unsettled_scores": """SELECT
        (SELECT count(*) FROM rounds r WHERE r.state = 'settled'
            AND EXISTS (SELECT 1 FROM guesses g WHERE g.round_id = r.id AND g.score IS NULL))
      + (SELECT count(*) FROM rounds r WHERE r.state = 'open'
            AND EXISTS (SELECT 1 FROM payouts y WHERE y.round_id = r.id))""",
    "stuck_rounds": """SELECT count(*) FROM rounds
        WHERE state <> 'settled' AND closes_at < now() - %(grace)s""",
    "house_mismatch": """SELECT abs(
        coalesce((SELECT sum(amount) FROM ledger WHERE account = 'house'), 0)
        + coalesce((SELECT sum(amount) FROM movements WHERE kind = 'grant'), 0))
      + (SELECT count(*) FROM ledger l JOIN movements m ON m.ref = l.ref
            WHERE l.account = 'house' AND (m.kind <> 'grant' OR l.amount > 0))""",
    "coins_unaccounted": """SELECT abs(
        coalesce((SELECT sum(amount) FROM movements WHERE kind = 'grant'), 0)
        - coalesce((SELECT sum(balance) FROM players), 0)
        - coalesce((SELECT sum(charged) FROM guesses), 0)
        + coalesce((SELECT sum(amount) FROM payouts), 0))""",
    "payout_pot_mismatches": """SELECT
        (SELECT count(*) FROM rounds r
            CROSS JOIN LATERAL (SELECT coalesce(sum(charged), 0) AS pot, count(score) AS scored
                                FROM guesses g WHERE g.round_id = r.id) c
            CROSS JOIN LATERAL (SELECT coalesce(sum(amount), 0) AS paid
                                FROM payouts y WHERE y.round_id = r.id) p
            WHERE p.paid > c.pot OR (r.state = 'settled' AND c.scored > 0 AND p.paid <> c.pot))
      + (SELECT count(*) FROM payouts y JOIN movements m ON m.ref = y.ref
            WHERE m.kind <> 'payout' OR m.amount <> y.amount)""",
    "duplicate_payouts": """SELECT count(*) FROM (
        SELECT d.account, c.account FROM movements m
          JOIN ledger d ON d.ref = m.ref AND d.amount < 0
          JOIN ledger c ON c.ref = m.ref AND c.amount > 0
        WHERE m.kind = 'payout' GROUP BY d.account, c.account HAVING count(DISTINCT m.ref) > 1) x""",
}


@dataclass(frozen=True, slots=True)
class Audit:
    """What every check found (:data:`CHECKS`; 0 is clean) and two counts for people.

    :attr:`ok` is True when every check is 0; :attr:`failures` names the others."""

    findings: dict[str, int] = field(default_factory=dict)
    charged_guesses: int = 0
    scored_guesses: int = 0

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def failures(self) -> dict[str, int]:
        return {name: value for name, value in self.findings.items() if value != 0}

    # The checks the end-of-run report prints by name.
    @property
    def ledger_sum(self) -> int:
        return self.findings.get("ledger_sum", 0)

    @property
    def unbalanced_refs(self) -> int:
        return self.findings.get("unbalanced_refs", 0)

    @property
    def negative_balances(self) -> int:
        return self.findings.get("negative_balances", 0)

    @property
    def balance_mismatches(self) -> int:
        return self.findings.get("balance_mismatches", 0)

    @property
    def pot_mismatches(self) -> int:
        return self.findings.get("pot_mismatches", 0)

    @property
    def duplicate_payouts(self) -> int:
        return self.findings.get("duplicate_payouts", 0)


@retried
async def audit(pool: AsyncConnectionPool, *, grace: timedelta = DEFAULT_GRACE) -> Audit:
    """Run every check in one snapshot (REPEATABLE READ, read only: an audit never writes).

    ``grace``: how long past its close a round may stay unsettled before it is stuck.
    """
    async with transaction(pool, isolation="REPEATABLE READ", read_only=True) as conn:
        return await audit_on(conn, grace=grace)


async def audit_on(conn: Conn, *, grace: timedelta = DEFAULT_GRACE) -> Audit:
    """Every check in one statement on ``conn``, inside the caller's transaction (so a
    test can inject a corruption, audit it and roll it back)."""
    parts = ", ".join(f"({sql})" for sql in CHECKS.values())
    cur = await conn.execute(f"SELECT {parts}, (SELECT count(*) FROM guesses),"
                             " (SELECT count(*) FROM guesses WHERE score IS NOT NULL)",
                             {"grace": grace})
    row = await cur.fetchone()
    assert row is not None
    values = [int(v) for v in row]
    return Audit(dict(zip(CHECKS, values[: len(CHECKS)], strict=True)), values[-2], values[-1])
