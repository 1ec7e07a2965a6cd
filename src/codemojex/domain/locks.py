"""Locks: positions a player has found exactly stay found. Pure.

A position guessed exactly (scored 100) becomes *locked* for that player in that
round. Every later guess of that player in that round has the locked emoji
overlaid at that position before it is charged and admitted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from codemojex.domain.errors import ConfigurationError
from codemojex.domain.guess import SIZE, Guess

__all__ = ["merge"]


def merge(locked: Mapping[int, str], guess: Sequence[str]) -> Guess:
    """Overlay ``locked`` (position → emoji) on ``guess``.

    Guarantees: the result has the guess's length; every locked position holds
    its locked emoji; every other position is the guess's. Idempotent:
    ``merge(l, merge(l, g)) == merge(l, g)``. Raises ConfigurationError for a position
    outside ``0..5`` or a guess of the wrong length (misuse).
    """
    if len(guess) != SIZE:
        raise ConfigurationError(f"a guess has {SIZE} emojis")
    for pos in locked:
        if not 0 <= pos < SIZE:
            raise ConfigurationError(f"lock position {pos} outside 0..{SIZE - 1}")
    return tuple(locked.get(i, e) for i, e in enumerate(guess))
