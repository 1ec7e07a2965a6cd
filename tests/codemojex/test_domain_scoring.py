"""Scoring: 100 − 20·d per position, out of 600."""

from __future__ import annotations

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


@given(six, six)
def test_deterministic(secret: tuple[str, ...], guess: tuple[str, ...]) -> None:
    assert score(secret, guess) == score(secret, guess)


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
