"""After a run: the leaderboard, the payouts, the rates and the audit (``codemojex play``).

The audit is the wallet's (:func:`codemojex.wallet.audit`: the ledger sums to
zero, every movement balances, no balance is negative, balances and pots agree
with their ledger legs, no (round, player) is paid twice) plus the run's own
checks:

* every charged guess of the run is admitted and scored (and a score is
  stored once by construction: ``UPDATE … WHERE score IS NULL``);
* every scored guess of the run's rounds has its score notification delivered
  (:func:`delivered_score_notes`: its derived id is ``done`` on ``cm.notify``; one
  id per guess, so never two). Every count is scoped to the same rounds, whatever
  process delivered the notes (a resumed game counts the notes its crashed
  predecessor delivered, too);
* every round is settled and its stored payouts equal a fresh run of the pure
  sealed pass over its scored guesses (so each winner was paid once, the right amount).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from psycopg_pool import AsyncConnectionPool
from rich.console import Console
from rich.table import Table

from codemojex.domain.payouts import Payout, ScoredGuess, settle
from codemojex.play import Tally
from codemojex.service import Services
from codemojex.wallet import Audit, audit
from codemojex.workers.score_worker import note_id

__all__ = ["Checks", "check_run", "delivered_score_notes", "print_report"]


@dataclass(slots=True)
class Checks:
    audit: Audit
    charged: int = 0
    scored: int = 0
    unadmitted: int = 0
    unsettled: int = 0
    payout_mismatches: list[str] = field(default_factory=list)
    score_notes: int | None = None
    admit_window_s: float = 0.0
    score_window_s: float = 0.0

    @property
    def failures(self) -> list[str]:
        out = []
        if not self.audit.ok:
            out.append(f"wallet audit failed: {self.audit}")
        if self.charged != self.scored:
            out.append(f"{self.charged - self.scored} charged guesses unscored")
        if self.unadmitted:
            out.append(f"{self.unadmitted} charged guesses never admitted")
        if self.unsettled:
            out.append(f"{self.unsettled} rounds unsettled")
        out += self.payout_mismatches
        if self.score_notes is not None and self.score_notes != self.scored:
            out.append(f"{self.score_notes} score notifications for {self.scored} scored guesses")
        return out

    @property
    def ok(self) -> bool:
        return not self.failures


async def _rows(pool: AsyncConnectionPool, sql: str, args: tuple[object, ...]) -> list[tuple[object, ...]]:
    async with pool.connection() as conn:
        cur = await conn.execute(sql, args)
        return list(await cur.fetchall())


async def delivered_score_notes(services: Services, round_ids: list[str], *, chunk: int = 500) -> int:
    """How many scored guesses of ``round_ids`` have their score notification delivered
    (its job, under the id derived from the guess id, is ``done`` on ``cm.notify``)."""
    rows = await _rows(services.pool, "SELECT id FROM guesses WHERE round_id = ANY(%s)"
                       " AND score IS NOT NULL", (round_ids,))
    delivered = 0
    for start in range(0, len(rows), chunk):
        jobs = await asyncio.gather(*(services.notifications.job(note_id(str(r[0])))
                                      for r in rows[start:start + chunk]))
        delivered += sum(1 for j in jobs if j is not None and j.get("state") == b"done")
    return delivered


async def check_run(
    pool: AsyncConnectionPool, round_ids: list[str], *, score_notes: int | None = None
) -> Checks:
    """Audit the books and the rounds ``round_ids`` (see the module docstring)."""
    checks = Checks(audit=await audit(pool), score_notes=score_notes)
    (row,) = await _rows(pool, """
        SELECT count(*), count(score), count(*) FILTER (WHERE admitted_at IS NULL),
               coalesce(extract(epoch FROM max(admitted_at) - min(created_at)), 0),
               coalesce(extract(epoch FROM max(scored_at) - min(created_at)), 0)
        FROM guesses WHERE round_id = ANY(%s)""", (round_ids,))
    checks.charged, checks.scored, checks.unadmitted = (int(str(v)) for v in row[:3])
    checks.admit_window_s, checks.score_window_s = float(str(row[3])), float(str(row[4]))
    for rid in round_ids:
        ((state, charged_pot),) = await _rows(pool, "SELECT state, (SELECT coalesce(sum(charged), 0)"
                                              " FROM guesses WHERE round_id = r.id) FROM rounds r"
                                              " WHERE id = %s", (rid,))
        if state != "settled":
            checks.unsettled += 1
            continue
        guesses = [ScoredGuess(str(i), str(p), int(str(s)), int(str(q))) for i, p, s, q in await _rows(
            pool, "SELECT id, player_id, score, seq FROM guesses WHERE round_id = %s", (rid,))]
        expected = settle(int(str(charged_pot)), guesses)
        stored = tuple(Payout(str(p), int(str(a)), str(g)) for p, a, g in await _rows(
            pool, "SELECT player_id, amount, guess_id FROM payouts WHERE round_id = %s ORDER BY player_id",
            (rid,)))
        if stored != expected:
            checks.payout_mismatches.append(f"round {rid}: payouts differ from the sealed pass")
    return checks


async def print_report(pool: AsyncConnectionPool, tally: Tally, checks: Checks, console: Console) -> None:
    players = tally.player_ids
    board = Table(title="Leaderboard (top 10 by balance)")
    for col in ("#", "player", "balance", "won", "guesses", "best"):
        board.add_column(col, justify="right" if col not in ("player",) else "left")
    rows = await _rows(pool, """
        SELECT p.id, p.balance,
               coalesce((SELECT sum(amount) FROM payouts WHERE player_id = p.id), 0),
               (SELECT count(*) FROM guesses WHERE player_id = p.id),
               coalesce((SELECT max(score) FROM guesses WHERE player_id = p.id), 0)
        FROM players p WHERE p.id = ANY(%s) ORDER BY p.balance DESC, p.id LIMIT 10""", (players,))
    for n, (pid, bal, won, count, best) in enumerate(rows, 1):
        board.add_row(str(n), str(pid), str(bal), str(won), str(count), str(best))
    console.print(board)

    pay = Table(title="Rounds and payouts")
    for col in ("round", "guesses", "pot", "winners", "paid", "top payout"):
        pay.add_column(col)
    for rid in tally.round_ids:
        ((count, pot, winners, paid, top),) = await _rows(pool, """
            SELECT (SELECT count(*) FROM guesses WHERE round_id = %s),
                   (SELECT coalesce(sum(charged), 0) FROM guesses WHERE round_id = %s),
                   count(*), coalesce(sum(amount), 0), coalesce(max(amount), 0)
            FROM payouts WHERE round_id = %s""", (rid, rid, rid))
        pay.add_row(rid, str(count), str(pot), str(winners), str(paid), str(top))
    console.print(pay)

    admitted_rate = tally.admitted / tally.submit_s if tally.submit_s else 0.0
    scored_rate = checks.scored / checks.score_window_s if checks.score_window_s else 0.0
    console.print(
        f"[bold]rates[/]: {tally.admitted} guesses admitted in {tally.submit_s:.2f}s of submission "
        f"= [bold]{admitted_rate:,.0f}/s[/]; {checks.scored} scored in {checks.score_window_s:.2f}s "
        f"(first charge to last score) = [bold]{scored_rate:,.0f}/s[/]"
    )
    rejected = ", ".join(f"{r.value} {n}" for r, n in sorted(tally.rejected.items())) or "none"
    console.print(f"submitted {tally.submitted}; rejected: {rejected}; admitted by the relay: "
                  f"{tally.queued_late}")
    a = checks.audit
    console.print(
        f"[bold]audit[/]: ledger sum {a.ledger_sum}, unbalanced movements {a.unbalanced_refs}, "
        f"negative balances {a.negative_balances}, balance mismatches {a.balance_mismatches}, "
        f"pot mismatches {a.pot_mismatches}, duplicate payouts {a.duplicate_payouts}; "
        f"charged {checks.charged}, scored {checks.scored}, unadmitted {checks.unadmitted}, "
        f"unsettled rounds {checks.unsettled}, score notifications {checks.score_notes}"
    )
    if checks.ok:
        console.print("[bold green]AUDIT CLEAN[/]: the ledger sums to zero, no balance is negative, "
                      "every charged guess was scored once, every winner paid once.")
    else:
        for failure in checks.failures:
            console.print(f"[bold red]AUDIT FAILED[/]: {failure}")
