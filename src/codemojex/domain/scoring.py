"""Scoring: per position ``100 − 20·d``, out of 600, linear only. Pure.

``d`` is the distance from the guessed position to the nearest position where
the secret holds that emoji: 0 is exact (100 points), 5 is the opposite end
(0 points). An emoji absent from the secret scores 0. The same secret and
guess always give the same score; emojis are compared by exact string (both
come from the round's set, in its spelling).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from codemojex.domain.errors import ConfigurationError
from codemojex.domain.guess import SIZE

__all__ = ["MAX_SCORE", "POINTS_PER_STEP", "Score", "exact_positions", "score", "secret_hash"]

POSITION_MAX = 100
POINTS_PER_STEP = 20  # 100 / 5: the farthest possible distance (5) scores exactly 0
MAX_SCORE = POSITION_MAX * SIZE


@dataclass(frozen=True, slots=True)
class Score:
    """``positions[i]`` is the points of position ``i``; ``total`` is their sum (0..600)."""

    positions: tuple[int, ...]

    @property
    def total(self) -> int:
        return sum(self.positions)

    @property
    def perfect(self) -> bool:
        return self.total == MAX_SCORE


def _check(secret: Sequence[str], guess: Sequence[str]) -> None:
    if len(secret) != SIZE or len(guess) != SIZE:
        raise ConfigurationError(f"secret and guess must both have {SIZE} emojis")


def score(secret: Sequence[str], guess: Sequence[str]) -> Score:
    """Score ``guess`` against ``secret``. Raises ConfigurationError only on wrong lengths."""
    _check(secret, guess)
    where: dict[str, list[int]] = {}
    for j, e in enumerate(secret):
        where.setdefault(e, []).append(j)
    points = []
    for i, e in enumerate(guess):
        spots = where.get(e)
        if spots is None:
            points.append(0)
        else:
            d = min(abs(i - j) for j in spots)
            points.append(POSITION_MAX - POINTS_PER_STEP * d)
    return Score(tuple(points))


def exact_positions(secret: Sequence[str], guess: Sequence[str]) -> Mapping[int, str]:
    """The positions ``guess`` got exactly right, with their emoji: these become locks."""
    _check(secret, guess)
    return {i: g for i, (s, g) in enumerate(zip(secret, guess, strict=True)) if s == g}


def secret_hash(secret: Sequence[str]) -> str:
    """The hash a round's row keeps of its secret (migration ``0006_secret_hash`` computes the
    same in PostgreSQL): sha256 over the emojis joined by U+001F, UTF-8, in hex."""
    return hashlib.sha256("\x1f".join(secret).encode("utf-8")).hexdigest()
