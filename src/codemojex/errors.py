"""The Codemojex exception root and the closed set of rejection reasons.

Expected outcomes (a bad guess, an insufficient balance, a retried movement)
are *return values*, never exceptions. Exceptions are for misuse and failures::

    CodemojexError
    ├── ConfigurationError     a setting or argument that cannot work
    ├── DatabaseError          PostgreSQL could not be started or reached
    └── MigrationError         the schema on the server disagrees with ours
"""

from __future__ import annotations

import enum

__all__ = [
    "CodemojexError",
    "ConfigurationError",
    "DatabaseError",
    "MigrationError",
    "Reason",
]


class Reason(enum.StrEnum):
    """The closed set of reasons a guess submission is refused (seed 000 §1)."""

    NO_ROUND = "no_round"
    CLOSED = "closed"
    EXPIRED = "expired"
    BAD_GUESS = "bad_guess"
    INSUFFICIENT = "insufficient"


class CodemojexError(Exception):
    """Root of every exception raised by codemojex."""


class ConfigurationError(CodemojexError, ValueError):
    """A setting or argument that cannot work (misuse, not an expected outcome)."""


class DatabaseError(CodemojexError):
    """PostgreSQL could not be started, stopped or reached."""


class MigrationError(CodemojexError):
    """An applied migration differs from the packaged file, or a file is malformed."""
