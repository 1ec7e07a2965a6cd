"""The Codemojex wallet: PostgreSQL money with a double-entry ledger.

Every call is async (psycopg 3, an ``AsyncConnectionPool``) and is one
transaction. Expected outcomes come back as typed values
(:mod:`codemojex.wallet.results`); exceptions mean misuse or failure.

Guarantees: balances never go below zero (CHECK ``players_non_negative``);
every movement is two ledger legs summing to zero (checked at commit); each
movement has a unique ``ref``, so a retry applies once; money is integers.
"""

from codemojex.wallet.audit import Audit, PendingGuess, audit, mark_admitted, unadmitted
from codemojex.wallet.migrate import Migration, load_migrations, migrate
from codemojex.wallet.money import (
    HOUSE,
    charge_guess,
    charge_ref,
    grant,
    grant_start,
    pay,
    pay_on,
    player_account,
    round_account,
    start_ref,
)
from codemojex.wallet.results import (
    AlreadyApplied,
    AlreadyCharged,
    AlreadyPaid,
    AlreadyScored,
    Charged,
    Granted,
    Insufficient,
    NotReady,
    Paid,
    RoundRefused,
    Scored,
    UnknownGuess,
    UnknownPlayer,
)
from codemojex.wallet.rounds import (
    Round,
    balance,
    close_round,
    create_round,
    ensure_player,
    get_round,
    locked_positions,
    record_score,
    scored_guesses,
    settle_round,
)

__all__ = [
    "HOUSE",
    "AlreadyApplied",
    "AlreadyCharged",
    "AlreadyPaid",
    "AlreadyScored",
    "Audit",
    "Charged",
    "Granted",
    "Insufficient",
    "Migration",
    "NotReady",
    "Paid",
    "PendingGuess",
    "Round",
    "RoundRefused",
    "Scored",
    "UnknownGuess",
    "UnknownPlayer",
    "audit",
    "balance",
    "charge_guess",
    "charge_ref",
    "close_round",
    "create_round",
    "ensure_player",
    "get_round",
    "grant",
    "grant_start",
    "load_migrations",
    "locked_positions",
    "mark_admitted",
    "migrate",
    "pay",
    "pay_on",
    "player_account",
    "record_score",
    "round_account",
    "scored_guesses",
    "settle_round",
    "start_ref",
    "unadmitted",
]
