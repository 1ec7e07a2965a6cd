"""Typed outcomes of wallet calls. Expected outcomes are values, never exceptions."""

from __future__ import annotations

from dataclasses import dataclass

from codemojex.domain.errors import Reason

__all__ = [
    "AlreadyApplied",
    "AlreadyCharged",
    "AlreadyPaid",
    "AlreadyScored",
    "Charged",
    "Granted",
    "Insufficient",
    "NotReady",
    "Paid",
    "RoundRefused",
    "Scored",
    "UnknownGuess",
    "UnknownPlayer",
]


@dataclass(frozen=True, slots=True)
class Charged:
    """The guess was charged and recorded; ``balance`` is the player's new balance."""

    guess_id: str
    balance: int
    price: int


@dataclass(frozen=True, slots=True)
class AlreadyCharged:
    """A retry: this guess id was charged before. Nothing changed."""

    guess_id: str


@dataclass(frozen=True, slots=True)
class Insufficient:
    """The balance does not cover the price. Nothing changed."""

    balance: int
    price: int
    reason: Reason = Reason.INSUFFICIENT


@dataclass(frozen=True, slots=True)
class RoundRefused:
    """The round does not exist (``no_round``), is not open (``closed``) or is past
    its closing time (``expired``). Nothing changed."""

    round_id: str
    reason: Reason


@dataclass(frozen=True, slots=True)
class UnknownPlayer:
    """No such player. Nothing changed."""

    player: str


@dataclass(frozen=True, slots=True)
class Granted:
    """Coins granted; ``balance`` is the player's new balance."""

    ref: str
    balance: int


@dataclass(frozen=True, slots=True)
class AlreadyApplied:
    """A movement with this ref exists already. Nothing changed."""

    ref: str


@dataclass(frozen=True, slots=True)
class Paid:
    """Payout made; ``balance`` is the player's new balance."""

    ref: str
    balance: int


@dataclass(frozen=True, slots=True)
class AlreadyPaid:
    """This ref, or a payout of this round to this player, exists. Nothing changed."""

    ref: str


@dataclass(frozen=True, slots=True)
class Scored:
    """The score was recorded (first time)."""

    guess_id: str
    score: int


@dataclass(frozen=True, slots=True)
class AlreadyScored:
    """The guess had a score already (``score``, the first one, stands)."""

    guess_id: str
    score: int


@dataclass(frozen=True, slots=True)
class UnknownGuess:
    """No such guess."""

    guess_id: str


@dataclass(frozen=True, slots=True)
class NotReady:
    """The round cannot settle yet: it is still open or has unscored guesses."""

    round_id: str
    state: str
    unscored: int
