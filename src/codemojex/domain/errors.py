"""The Codemojex exception root and the closed set of rejection reasons.

Expected outcomes (a bad guess, an insufficient balance, a retried movement)
are *return values*, never exceptions. Exceptions are for misuse and failures::

    CodemojexError
    ├── ConfigurationError     a setting or argument that cannot work: the one type for
    │                          misuse across the game (also a ValueError)
    ├── DatabaseError          PostgreSQL could not be started, reached or used
    │   └── Unavailable        a transient failure outlasted the retry bound
    ├── InvalidAmount          an amount or price that is not an integer in range
    │                          (also a ConfigurationError and a ValueError)
    ├── InvalidSetting         a series setting that is not an integer in its range
    │                          (also a ConfigurationError and a ValueError)
    └── MigrationError         the schema on the server disagrees with ours
"""

from __future__ import annotations

import enum

__all__ = [
    "CodemojexError",
    "ConfigurationError",
    "DatabaseError",
    "InvalidAmount",
    "InvalidSetting",
    "MigrationError",
    "Reason",
    "Unavailable",
]


class Reason(enum.StrEnum):
    """The closed set of reasons a guess submission is refused (the product's five, in
    :mod:`codemojex.service.guesses`' rejection order, plus ``unavailable``)."""

    NO_ROUND = "no_round"
    CLOSED = "closed"
    EXPIRED = "expired"
    BAD_GUESS = "bad_guess"
    INSUFFICIENT = "insufficient"
    # Not one of the product's five: PostgreSQL stayed unreachable past the retry bound, so
    # nothing was decided (decision 0009). Retrying later, with the same key, is safe.
    UNAVAILABLE = "unavailable"


class CodemojexError(Exception):
    """Root of every exception raised by codemojex."""


class ConfigurationError(CodemojexError, ValueError):
    """A setting or argument that cannot work (misuse, not an expected outcome)."""


class DatabaseError(CodemojexError):
    """PostgreSQL could not be started, stopped, reached or used.

    Wallet calls raise it (chained to the driver's exception) for a failure that a
    retry cannot help; no ``psycopg`` exception type leaves the wallet.
    """


class Unavailable(DatabaseError):
    """A transient PostgreSQL failure (a dropped connection, a restart, a deadlock
    victim, a serialization failure) lasted past the retry bound. Nothing is known
    to have changed; a retry with the same idempotency ref is safe."""


class InvalidAmount(ConfigurationError):
    """An amount or price that is not an ``int`` in range (bool, float, nan, inf,
    negative, zero where a positive is needed, or above the wallet's maximum).
    Raised before anything is written."""


class InvalidSetting(ConfigurationError):
    """A series setting (round length, price, rounds, start grant, daily top-up, gap) that
    is not an ``int`` (bools refused) in its range; ``name`` says which. Raised before
    anything is written."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


class MigrationError(CodemojexError):
    """An applied migration differs from the packaged file, or a file is malformed."""
