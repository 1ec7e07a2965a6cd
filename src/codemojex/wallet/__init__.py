"""The Codemojex wallet: PostgreSQL money with a double-entry ledger.

Every call is async (psycopg 3, an ``AsyncConnectionPool``) and is one
transaction with its isolation level set (:mod:`.tx`). Expected outcomes come
back as typed values (:mod:`codemojex.wallet.results`); exceptions mean misuse
(``InvalidAmount``, ValueError) or failure (``Unavailable`` past the retry bound,
``DatabaseError``); no ``psycopg`` exception type leaves the wallet.

Guarantees: balances never go below zero (CHECK ``players_non_negative``);
every movement is two ledger legs summing to zero (checked at commit) and the
ledger is append-only; each movement has a unique ``ref``, so a retry applies
once; money is integers in range (:mod:`.amounts`); row locks follow one order,
taken by one function (:mod:`.locks`); ties go by the server's charge order.
"""

from codemojex.wallet.amounts import MAX_AMOUNT, amount
from codemojex.wallet.audit import CHECKS, DEFAULT_GRACE, Audit, audit, audit_on
from codemojex.wallet.locks import Locked, LockedRound, lock
from codemojex.wallet.migrate import Migration, load_migrations, migrate
from codemojex.wallet.money import (
    HOUSE,
    OUTBOX,
    charge_guess,
    charge_ref,
    grant,
    grant_start,
    pay,
    pay_locked,
    player_account,
    round_account,
    start_ref,
)
from codemojex.wallet.pending import (
    PendingGuess,
    StoredGuess,
    get_guess,
    mark_admitted,
    mark_notified,
    unadmitted,
)
from codemojex.wallet.players import balance, ensure_player
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
    close_round,
    create_round,
    get_round,
    locked_positions,
    record_score,
    scored_guesses,
)
from codemojex.wallet.settle import settle_round
from codemojex.wallet.tx import (
    STATS,
    RetryPolicy,
    retried,
    retry,
    retry_policy,
    transaction,
    transient,
    within,
)

__all__ = [
    "CHECKS",
    "DEFAULT_GRACE",
    "HOUSE",
    "MAX_AMOUNT",
    "OUTBOX",
    "STATS",
    "AlreadyApplied",
    "AlreadyCharged",
    "AlreadyPaid",
    "AlreadyScored",
    "Audit",
    "Charged",
    "Granted",
    "Insufficient",
    "Locked",
    "LockedRound",
    "Migration",
    "NotReady",
    "Paid",
    "PendingGuess",
    "RetryPolicy",
    "Round",
    "RoundRefused",
    "Scored",
    "StoredGuess",
    "UnknownGuess",
    "UnknownPlayer",
    "amount",
    "audit",
    "audit_on",
    "balance",
    "charge_guess",
    "charge_ref",
    "close_round",
    "create_round",
    "ensure_player",
    "get_guess",
    "get_round",
    "grant",
    "grant_start",
    "load_migrations",
    "lock",
    "locked_positions",
    "mark_admitted",
    "mark_notified",
    "migrate",
    "pay",
    "pay_locked",
    "player_account",
    "record_score",
    "retried",
    "retry",
    "retry_policy",
    "round_account",
    "scored_guesses",
    "settle_round",
    "start_ref",
    "transaction",
    "transient",
    "unadmitted",
    "within",
]
