"""Parsing and validating guesses; drawing secrets; locks."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from codemojex.domain import (
    CLASSIC,
    FOOD,
    SIZE,
    BadGuess,
    EmojiSet,
    draw_secret,
    format_guess,
    merge,
    parse_guess,
)
from codemojex.domain.errors import Reason

guesses = st.lists(st.sampled_from(CLASSIC.emojis), min_size=SIZE, max_size=SIZE).map(tuple)
separators = st.sampled_from(["", " ", ",", ", ", " , ", "\t", ";", "  "])


@given(guesses)
def test_round_trip(guess: tuple[str, ...]) -> None:
    assert parse_guess(format_guess(guess), CLASSIC) == guess


@given(guesses, st.lists(separators, min_size=SIZE + 1, max_size=SIZE + 1))
def test_separators_are_optional(guess: tuple[str, ...], seps: list[str]) -> None:
    text = seps[0] + "".join(e + s for e, s in zip(guess, seps[1:], strict=True))
    assert parse_guess(text, CLASSIC) == guess


@given(st.text(max_size=600))
def test_any_text_gives_a_guess_or_bad_guess(text: str) -> None:
    result = parse_guess(text, CLASSIC)
    if isinstance(result, BadGuess):
        assert result.reason is Reason.BAD_GUESS
    else:
        assert len(result) == SIZE
        assert all(e in CLASSIC.emojis for e in result)


@pytest.mark.parametrize(
    "text",
    ["", "😀😎🤖👻🐱", "😀😎🤖👻🐱🐶🦊", "😀😎🤖👻🐱🍎", "hello!", "😀😎🤖👻🐱x"],
)
def test_bad_guesses(text: str) -> None:
    assert isinstance(parse_guess(text, CLASSIC), BadGuess)


def test_typed_without_vs16_matches_the_sets_spelling() -> None:
    assert parse_guess("❤ ❤ ❤ ❤ ❤ ❤", CLASSIC) == ("❤️",) * 6


def test_emoji_from_another_set_is_refused() -> None:
    assert isinstance(parse_guess("🍎🍎🍎🍎🍎🍎", CLASSIC), BadGuess)
    assert parse_guess("🍎🍎🍎🍎🍎🍎", FOOD) == ("🍎",) * 6


@given(st.sampled_from([CLASSIC, FOOD]), st.booleans())
def test_secrets_come_from_the_set(s: EmojiSet, distinct: bool) -> None:
    secret = draw_secret(s, distinct=distinct)
    assert len(secret) == SIZE
    assert all(e in s.emojis for e in secret)
    if distinct:
        assert len(set(secret)) == SIZE


locked_maps = st.dictionaries(st.integers(0, SIZE - 1), st.sampled_from(CLASSIC.emojis))


@given(locked_maps, guesses)
def test_merge_overlays_locks_and_keeps_the_rest(locked: dict[int, str], guess: tuple[str, ...]) -> None:
    merged = merge(locked, guess)
    assert len(merged) == SIZE
    for i in range(SIZE):
        assert merged[i] == locked.get(i, guess[i])
    assert merge(locked, merged) == merged


def test_merge_refuses_bad_positions() -> None:
    with pytest.raises(ValueError, match="outside"):
        merge({6: "😀"}, ("😀",) * 6)
