"""Scoring: 100 − 20·d per position, out of 600."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from codemojex.domain import CLASSIC, MAX_SCORE, SIZE, exact_positions, score

six = st.lists(st.sampled_from(CLASSIC.emojis), min_size=SIZE, max_size=SIZE).map(tuple)
distinct_six = st.permutations(CLASSIC.emojis).map(lambda p: tuple(p[:SIZE]))


@given(six, six)
def test_bounds_and_steps(secret: tuple[str, ...], guess: tuple[str, ...]) -> None:
    s = score(secret, guess)
    assert 0 <= s.total <= MAX_SCORE
    assert all(p in (0, 20, 40, 60, 80, 100) for p in s.positions)


def reference_points(secret: tuple[str, ...], guess: tuple[str, ...]) -> list[int]:
    """An independent reading of the rule, written differently on purpose: every position
    earns the best 100 - 20*|i - j| over the secret's positions j holding its emoji."""
    return [max([100 - 20 * abs(i - j) for j in range(SIZE) if secret[j] == g], default=0)
            for i, g in enumerate(guess)]


@given(six, six)
def test_matches_an_independent_reference(secret: tuple[str, ...], guess: tuple[str, ...]) -> None:
    assert list(score(secret, guess).positions) == reference_points(secret, guess)


@given(six, six)
def test_a_redelivered_guess_rescores_identically(secret: tuple[str, ...],
                                                  guess: tuple[str, ...]) -> None:
    # A re-delivered job carries equal strings, not the same objects, maybe in a list.
    copy = [("x" + e)[1:] for e in guess]
    assert all(a == b and a is not b for a, b in zip(copy, guess, strict=True) if len(a) > 1)
    assert score(list(secret), copy) == score(secret, guess)


@pytest.mark.parametrize(("secret", "guess", "positions"), [
    # the nearest copy of a repeated emoji counts: 😀 at 0 and 5
    (("😀", "😎", "🤖", "👻", "🐱", "😀"), ("😎", "😎", "😀", "😀", "😀", "😀"),
     (80, 100, 60, 60, 80, 100)),
    # reversed secret: distances 5, 3, 1, 1, 3, 5
    (("😀", "😎", "🤖", "👻", "🐱", "🐶"), ("🐶", "🐱", "👻", "🤖", "😎", "😀"),
     (0, 40, 80, 80, 40, 0)),
    # one emoji everywhere, present once at position 2
    (("😀", "😎", "🤖", "👻", "🐱", "🐶"), ("🤖",) * 6, (60, 80, 100, 80, 60, 40)),
    # nothing in common
    (("😀", "😎", "🤖", "👻", "🐱", "🐶"), ("🍕",) * 6, (0, 0, 0, 0, 0, 0)),
])
def test_known_vectors(secret: tuple[str, ...], guess: tuple[str, ...],
                       positions: tuple[int, ...]) -> None:
    assert score(secret, guess).positions == positions
    assert score(secret, guess).total == sum(positions)
    assert reference_points(secret, guess) == list(positions)


@given(six)
def test_exact_guess_is_perfect(secret: tuple[str, ...]) -> None:
    assert score(secret, secret).total == MAX_SCORE
    assert score(secret, secret).perfect


@given(six, six)
def test_exact_positions_score_100_and_only_they(secret: tuple[str, ...], guess: tuple[str, ...]) -> None:
    s = score(secret, guess)
    exact = exact_positions(secret, guess)
    assert {i for i, p in enumerate(s.positions) if p == 100} == set(exact)


@given(distinct_six, st.integers(0, SIZE - 1), st.integers(0, SIZE - 1))
def test_linear_in_distance(secret: tuple[str, ...], i: int, j: int) -> None:
    # Fill every other position with an emoji absent from the secret.
    absent = next(e for e in CLASSIC.emojis if e not in secret)
    guess = [absent] * SIZE
    guess[i] = secret[j]
    s = score(secret, guess)
    assert s.positions[i] == 100 - 20 * abs(i - j)
    assert s.total == s.positions[i]


def test_worked_example() -> None:
    secret = ("😀", "😎", "🤖", "👻", "🐱", "🐶")
    guess = ("😎", "😀", "🤖", "🐶", "🍕", "😀")
    # 😎: d=1 → 80; 😀: d=1 → 80; 🤖: exact → 100; 🐶: d=2 → 60; 🍕: absent → 0; 😀: d=5 → 0
    assert score(secret, guess).positions == (80, 80, 100, 60, 0, 0)
    assert score(secret, guess).total == 320
