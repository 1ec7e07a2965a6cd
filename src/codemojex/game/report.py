"""After a run: the leaderboard, the payouts, the rates and the audit (``codemojex play``).

The audit is the wallet's (:func:`codemojex.wallet.audit`: the ledger sums to
zero, every movement balances, no balance is negative, balances and pots agree
with their ledger legs, no (round, player) is paid twice) plus the run's own
checks:

* every charged guess of the run is admitted and scored (and a score is
  stored once by construction: ``UPDATE … WHERE score IS NULL``);
* every scored guess of the run's rounds is told in a delivered message
  (:func:`delivered_score_notes`: the notification worker stamps ``notified_at`` on
  each guess a player's score note listed, in PostgreSQL, once that message is out; a
  note lists only scores not stamped yet, decision 0049). Every count is scoped to the
  same rounds and read from PostgreSQL, whatever
  process delivered the notes and however long ago (a resumed game counts the notes
  its crashed predecessor delivered, too, and the queue's done rows may have expired);
* every round is settled and its stored payouts equal a fresh run of the pure
  sealed pass over its scored guesses (so each winner was paid once, the right amount).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from psycopg_pool import AsyncConnectionPool
from rich.console import Console
from rich.table import Table

from codemojex.domain.errors import Reason
from codemojex.domain.payouts import settle
from codemojex.service import Services
from codemojex.wallet import Audit, audit, reads

__all__ = ["Checks", "Tally", "check_run", "delivered_score_notes", "print_report"]


@dataclass(slots=True)
class Tally:
    """What a run did: its players and rounds, and how its submissions went."""

    admitted: int = 0
    queued_late: int = 0  # admitted by the relay rather than by submit
    rejected: Counter[Reason] = field(default_factory=Counter)
    submit_s: float = 0.0  # wall time spent in submission phases
    run_tag: str = ""
    player_ids: list[str] = field(default_factory=list)
    round_ids: list[str] = field(default_factory=list)
    series: str = ""

    @property
    def submitted(self) -> int:
        return self.admitted + sum(self.rejected.values())


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


async def delivered_score_notes(services: Services, round_ids: list[str]) -> int:
    """How many scored guesses of ``round_ids`` were told in a delivered message (stamped
    ``notified_at`` in PostgreSQL by the notification worker)."""
    return await reads.count_notified(services.pool, round_ids)


async def check_run(
    pool: AsyncConnectionPool, round_ids: list[str], *, score_notes: int | None = None
) -> Checks:
    """Audit the books and the rounds ``round_ids`` (see the module docstring)."""
    checks = Checks(audit=await audit(pool), score_notes=score_notes)
    (checks.charged, checks.scored, checks.unadmitted, checks.admit_window_s,
     checks.score_window_s) = await reads.run_counts(pool, round_ids)
    for rid in round_ids:
        tally = await reads.round_tally(pool, rid)
        if tally is None or tally[0] != "settled":
            checks.unsettled += 1
            continue
        expected = settle(tally[1], await reads.round_guesses(pool, rid))
        stored = await reads.stored_payouts(pool, rid)
        if stored != expected:
            checks.payout_mismatches.append(f"round {rid}: payouts differ from the sealed pass")
    return checks


async def print_report(pool: AsyncConnectionPool, tally: Tally, checks: Checks, console: Console) -> None:
    players = tally.player_ids
    board = Table(title="Leaderboard (top 10 by balance)")
    for col in ("#", "player", "balance", "won", "guesses", "best"):
        board.add_column(col, justify="right" if col not in ("player",) else "left")
    rows = await reads.player_board(pool, players, 10)
    for n, (pid, bal, won, count, best) in enumerate(rows, 1):
        board.add_row(str(n), str(pid), str(bal), str(won), str(count), str(best))
    console.print(board)

    pay = Table(title="Rounds and payouts")
    for col in ("round", "guesses", "pot", "winners", "paid", "top payout"):
        pay.add_column(col)
    for rid in tally.round_ids:
        count, pot, winners, paid, top = await reads.round_summary(pool, rid)
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
