"""The sealed pass: a round's pot and its scored guesses in, payouts out. Pure.

Rules (deterministic; the result depends only on the *set* of guesses, never
on the order they are passed in; "earliest" means the smallest ``seq``, the
order in which PostgreSQL recorded the charges, never an id's bits: a Telegram
guess id is derived with timestamp 0, so its bits are a hash. Guesses without a
``seq`` (pure callers) fall back to the smallest guess id):

1. **No scored guess**: nothing is paid (``()``); the pot stays with the round.
2. **Golden rule**: if any guess scored a perfect 600, the perfect guesses
   share the whole pot equally and nobody else is paid.
3. **Otherwise**: every guess earns ``pot · score // total_score`` (floor).
   If every score is 0, every guess weighs the same instead.
4. **Remainder rule**: the coins left by the floors (fewer than the number of
   sharing guesses) all go to the *earliest best* guess: the highest score,
   then the earliest (smallest ``seq``).
5. A player's payout is the sum over their guesses; players whose sum is 0 are
   left out. The payout names the player's best (then earliest) guess.

Guarantee: whenever at least one scored guess exists, the payout amounts sum to
``pot`` exactly, every amount is a positive integer, and each player appears at
most once. So a re-run pays identically and, with one ref per (round, player),
never twice.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from codemojex.domain.errors import ConfigurationError
from codemojex.domain.scoring import MAX_SCORE

__all__ = ["Payout", "ScoredGuess", "payout_ref", "settle"]


@dataclass(frozen=True, slots=True)
class ScoredGuess:
    """One scored guess of the round. ``guess_id`` is its JOB id (unique); ``seq`` its
    place in the server's charge order (the wallet always gives it)."""

    guess_id: str
    player: str
    score: int
    seq: int | None = None


@dataclass(frozen=True, slots=True)
class Payout:
    """What one player receives from one round, and the guess that earned most of it."""

    player: str
    amount: int
    guess_id: str


def payout_ref(round_id: str, player: str) -> str:
    """The idempotency ref of a round's payout to a player: one movement per winner."""
    return f"payout:{round_id}:{player}"


def _rank(g: ScoredGuess) -> tuple[int, int, str]:
    return (-g.score, 0 if g.seq is None else g.seq, g.guess_id)  # best first, then earliest


def settle(pot: int, guesses: Iterable[ScoredGuess]) -> tuple[Payout, ...]:
    """Split ``pot`` over ``guesses`` by the rules above; sorted by player.

    Raises ConfigurationError on misuse: a negative pot, a score outside 0..600, two
    guesses with the same id or ``seq``, or ``seq`` given for some guesses only.
    """
    if pot < 0:
        raise ConfigurationError("pot must be >= 0")
    ranked = sorted(guesses, key=_rank)
    if len({g.guess_id for g in ranked}) != len(ranked):
        raise ConfigurationError("guess ids must be unique")
    seqs = {g.seq for g in ranked}
    if (None in seqs and len(seqs) > 1) or (None not in seqs and len(seqs) != len(ranked)):
        raise ConfigurationError("seq must be given for every guess or none, and be unique")
    for g in ranked:
        if not 0 <= g.score <= MAX_SCORE:
            raise ConfigurationError(f"score {g.score} outside 0..{MAX_SCORE}")
    if not ranked:
        return ()

    perfect = [g for g in ranked if g.score == MAX_SCORE]
    sharing = perfect or ranked
    # Golden rule, or nobody scored at all: equal shares. Otherwise in proportion to score.
    equal = bool(perfect) or ranked[0].score == 0
    weights = [1] * len(sharing) if equal else [g.score for g in sharing]
    total = sum(weights)
    shares = [pot * w // total for w in weights]
    shares[0] += pot - sum(shares)  # sharing[0] is the earliest best guess

    amounts: dict[str, int] = {}
    best: dict[str, str] = {}
    for g, share in zip(sharing, shares, strict=True):
        amounts[g.player] = amounts.get(g.player, 0) + share
        best.setdefault(g.player, g.guess_id)  # ranked order: the first seen is the best
    return tuple(
        Payout(player=p, amount=amounts[p], guess_id=best[p]) for p in sorted(amounts) if amounts[p] > 0
    )
