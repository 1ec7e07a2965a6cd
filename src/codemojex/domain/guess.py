"""Guesses: parse what a person types, validate it, and draw secrets. Pure.

A guess is exactly :data:`SIZE` emojis from the round's :class:`EmojiSet`,
returned in the set's own spelling (so ``❤`` typed without VS16 becomes the
set's ``❤️``). Separators between emojis are optional: whitespace, ``,`` ``;``
``|`` and their full-width forms are ignored. Anything else is a
:class:`BadGuess` (a value, not an exception).

Secrets are drawn with :mod:`secrets`. By default the six positions hold six
*distinct* emojis (drawn without replacement): with repeats a secret such as
``🍕🍕🍕🍕🍕🍕`` makes one cheap single-emoji guess score 600. ``distinct=False``
draws each position independently.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from codemojex.domain.emoji import EmojiSet, graphemes
from codemojex.domain.errors import Reason

__all__ = ["SIZE", "BadGuess", "Guess", "draw_secret", "format_guess", "parse_guess", "validate"]

SIZE = 6
Guess = tuple[str, ...]
"""Six emojis, each in its emoji set's spelling."""

_SEPARATORS = frozenset(",;|，；､、")


@dataclass(frozen=True, slots=True)
class BadGuess:
    """A refused guess: ``reason`` is always ``Reason.BAD_GUESS``; ``detail`` is for people."""

    detail: str
    reason: Reason = Reason.BAD_GUESS


def validate(emojis: Sequence[str], emoji_set: EmojiSet) -> Guess | BadGuess:
    """Check an already split guess: exactly six members of ``emoji_set``."""
    if len(emojis) != SIZE:
        return BadGuess(f"a guess has {SIZE} emojis, this one has {len(emojis)}")
    out: list[str] = []
    for i, e in enumerate(emojis):
        found = emoji_set.lookup(e) if isinstance(e, str) else None
        if found is None:
            return BadGuess(f"position {i + 1}: {e!r} is not in the {emoji_set.name} set")
        out.append(found)
    return tuple(out)


def parse_guess(text: str, emoji_set: EmojiSet) -> Guess | BadGuess:
    """Parse typed text into a guess. Never raises for any ``str`` input."""
    if not isinstance(text, str):
        return BadGuess("a guess is text")
    if len(text) > 512:  # six emojis fit with room to spare; refuse before splitting
        return BadGuess("a guess is at most 512 characters")
    clusters = [g for g in graphemes(text) if not g.isspace() and g not in _SEPARATORS]
    return validate(clusters, emoji_set)


def format_guess(guess: Sequence[str]) -> str:
    """The canonical display of a guess: emojis separated by one space.

    ``parse_guess(format_guess(g), s) == g`` for every valid guess ``g`` of ``s``.
    """
    return " ".join(guess)


def draw_secret(emoji_set: EmojiSet, *, distinct: bool = True) -> Guess:
    """Six emojis from ``emoji_set``, uniformly at random with a CSPRNG.

    ``distinct=True`` (the default) draws without replacement, so no emoji
    repeats; the set has at least six emojis, so this always succeeds.
    """
    pool = list(emoji_set.emojis)
    if not distinct:
        return tuple(secrets.choice(pool) for _ in range(SIZE))
    picked: list[str] = []
    for _ in range(SIZE):
        picked.append(pool.pop(secrets.randbelow(len(pool))))
    return tuple(picked)
