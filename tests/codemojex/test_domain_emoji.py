"""Grapheme handling and emoji sets."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from codemojex.domain import CLASSIC, DEFAULT_SETS, EmojiSet, canonical, graphemes

FLAG = "🇫🇷"
SKIN = "👍🏽"
ZWJ = "👩‍💻"
FAMILY = "👨‍👩‍👧"
KEYCAP = "1️⃣"
HEART = "❤️"
ENGLAND = "🏴\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f"
SPECIAL = [FLAG, SKIN, ZWJ, FAMILY, KEYCAP, HEART, ENGLAND]


@pytest.mark.parametrize("emoji", SPECIAL)
def test_each_special_emoji_is_one_grapheme(emoji: str) -> None:
    assert graphemes(emoji) == (emoji,)


def test_two_flags_in_a_row_split_into_two() -> None:
    assert graphemes("🇫🇷🇩🇪") == ("🇫🇷", "🇩🇪")


def test_an_odd_regional_indicator_stands_alone() -> None:
    assert graphemes("🇫🇷🇩") == ("🇫🇷", "🇩")


@given(st.lists(st.sampled_from([*SPECIAL, *CLASSIC.emojis]), max_size=12))
def test_concatenated_emojis_split_back(parts: list[str]) -> None:
    assert graphemes("".join(parts)) == tuple(parts)


@given(st.text())
def test_split_is_lossless(text: str) -> None:
    assert "".join(graphemes(text)) == text


def test_classic_has_flag_skin_tone_and_zwj() -> None:
    assert len(CLASSIC) >= 12
    assert FLAG in CLASSIC.emojis
    assert SKIN in CLASSIC.emojis
    assert ZWJ in CLASSIC.emojis


def test_lookup_ignores_vs16() -> None:
    assert CLASSIC.lookup("❤") == HEART
    assert canonical(HEART) == "❤"


@pytest.mark.parametrize(
    ("emojis", "set_id"),
    [
        (("😀",) * 6, "dupes"),
        (("😀", "😎", "🤖", "👻", "🐱"), "short"),
        (("😀", "😎", "🤖", "👻", "🐱", "ab"), "two-graphemes"),
        (("😀", "😎", "🤖", "👻", "🐱", "🐶"), "bad{id}"),
    ],
)
def test_bad_sets_are_refused(emojis: tuple[str, ...], set_id: str) -> None:
    with pytest.raises(ValueError):  # noqa: PT011
        EmojiSet(id=set_id, name="x", emojis=emojis)


def test_default_sets_are_valid_and_keyed_by_id() -> None:
    for key, s in DEFAULT_SETS.items():
        assert key == s.id
