"""Emoji sets and a grapheme splitter sufficient for emoji. Pure.

An *emoji* here is one user-perceived character (a grapheme cluster). The
splitter keeps together:

* flags: a pair of regional indicators (🇫🇷), and tag sequences (🏴󠁧󠁢󠁥󠁮󠁧󠁿);
* modifiers: skin tones (👍🏽), variation selectors VS15/VS16 (❤️), the keycap
  mark U+20E3 (1️⃣) and any combining mark (Unicode categories Mn, Me);
* ZWJ sequences: ``x ZWJ y ZWJ z`` is one cluster (👩‍💻, 👨‍👩‍👧).

It is not a full UAX #29 implementation (Hangul syllables, prepend marks and
the like are out of scope); for the inputs a guess can legally contain it
agrees with UAX #29. Two spellings that differ only by VS16 (``❤`` and ``❤️``)
share one :func:`canonical` key, so a set matches either.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field

from codemojex.domain.errors import ConfigurationError

__all__ = [
    "CLASSIC",
    "DEFAULT_SETS",
    "FOOD",
    "EmojiSet",
    "canonical",
    "default_set",
    "graphemes",
]

_ZWJ = "\u200d"
_VS15, _VS16 = "\ufe0e", "\ufe0f"
_KEYCAP = "\u20e3"


def _is_regional_indicator(ch: str) -> bool:
    return 0x1F1E6 <= ord(ch) <= 0x1F1FF


def _is_extender(ch: str) -> bool:
    """True for a code point that attaches to the cluster before it."""
    cp = ord(ch)
    return (
        ch in (_VS15, _VS16, _KEYCAP)
        or 0x1F3FB <= cp <= 0x1F3FF  # skin-tone modifiers
        or 0xE0020 <= cp <= 0xE007F  # tag characters (subdivision flags)
        or unicodedata.category(ch) in ("Mn", "Me")
    )


def _iter_graphemes(text: str) -> Iterator[str]:
    i, n = 0, len(text)
    while i < n:
        start = i
        i += 1
        if _is_regional_indicator(text[start]) and i < n and _is_regional_indicator(text[i]):
            i += 1  # a flag is exactly two regional indicators
        while i < n:
            if _is_extender(text[i]):
                i += 1
            elif text[i] == _ZWJ:
                # ZWJ glues the next character on; a trailing ZWJ stays with its cluster.
                i += 2 if i + 1 < n else 1
            else:
                break
        yield text[start:i]


def graphemes(text: str) -> tuple[str, ...]:
    """Split ``text`` into grapheme clusters; ``"".join(graphemes(t)) == t`` always."""
    return tuple(_iter_graphemes(text))


def canonical(emoji: str) -> str:
    """The comparison key of one emoji: the cluster with VS16 removed."""
    return emoji.replace(_VS16, "")


@dataclass(frozen=True, slots=True)
class EmojiSet:
    """A named set of distinct emojis a round's secret and guesses are drawn from.

    Guarantees (checked at construction): at least six emojis, each exactly one
    grapheme cluster, no two sharing a :func:`canonical` key, ``id`` non-empty
    and free of whitespace, braces and ``:`` (it may appear inside cache keys).
    """

    id: str
    name: str
    emojis: tuple[str, ...]
    # canonical key -> the set's spelling: a guess looks up each of its emojis (was a scan
    # of the set, canonicalising every member: ~60 calls a guess)
    _spelling: dict[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.id or any(c.isspace() or c in "{}:" for c in self.id):
            raise ConfigurationError(f"bad emoji set id {self.id!r}")
        if len(self.emojis) < 6:
            raise ConfigurationError(f"emoji set {self.id!r} needs at least 6 emojis")
        spelling: dict[str, str] = {}
        for e in self.emojis:
            if len(graphemes(e)) != 1 or e.isspace():
                raise ConfigurationError(f"{e!r} is not exactly one emoji")
            key = canonical(e)
            if key in spelling:
                raise ConfigurationError(f"{e!r} appears twice in emoji set {self.id!r}")
            spelling[key] = e
        object.__setattr__(self, "_spelling", spelling)

    def lookup(self, emoji: str) -> str | None:
        """The set's own spelling of ``emoji`` (VS16-insensitive), or None if absent."""
        return self._spelling.get(canonical(emoji))

    def __contains__(self, emoji: object) -> bool:
        return isinstance(emoji, str) and self.lookup(emoji) is not None

    def __len__(self) -> int:
        return len(self.emojis)


CLASSIC = EmojiSet(
    id="classic",
    name="Classic",
    emojis=(
        "😀", "😎", "🤖", "👻", "🐱", "🐶", "🦊", "🐸",
        "🍕", "🍩", "🚀", "⚽", "🎸", "❤️", "👍🏽", "🇫🇷",
        "👩‍💻", "1️⃣",
    ),
)  # fmt: skip  # the set includes a VS16, a skin tone, a flag, a ZWJ and a keycap emoji

FOOD = EmojiSet(
    id="food",
    name="Food",
    emojis=("🍎", "🍌", "🍇", "🍓", "🥑", "🥕", "🌽", "🧀", "🍔", "🌮", "🍣", "🍰"),
)

DEFAULT_SETS: dict[str, EmojiSet] = {s.id: s for s in (CLASSIC, FOOD)}


def default_set(set_id: str) -> EmojiSet | None:
    """The built-in emoji set called ``set_id``, or None."""
    return DEFAULT_SETS.get(set_id)
