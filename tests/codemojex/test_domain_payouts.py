"""The sealed pass: conservation, order independence, golden and remainder rules."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from codemojex.domain import MAX_SCORE, ScoredGuess, settle


@st.composite
def rounds(draw: st.DrawFn) -> list[ScoredGuess]:
    n = draw(st.integers(0, 30))
    ids = draw(st.lists(st.integers(0, 10**6), min_size=n, max_size=n, unique=True))
    return [
        ScoredGuess(
            guess_id=f"JOB{i:07d}",
            player=draw(st.sampled_from(["ann", "bob", "cat", "dan"])),
            score=draw(st.sampled_from([0, 20, 100, 320, 580, MAX_SCORE]) | st.integers(0, 600)),
        )
        for i in ids
    ]


pots = st.integers(0, 10**12)


@given(pots, rounds())
def test_conservation(pot: int, guesses: list[ScoredGuess]) -> None:
    payouts = settle(pot, guesses)
    if guesses:
        assert sum(p.amount for p in payouts) == pot
    else:
        assert payouts == ()
    assert all(p.amount > 0 for p in payouts)
    assert len({p.player for p in payouts}) == len(payouts)


@given(pots, rounds(), st.randoms(use_true_random=False))
def test_order_independent(pot: int, guesses: list[ScoredGuess], rnd: random.Random) -> None:
    shuffled = list(guesses)
    rnd.shuffle(shuffled)
    assert settle(pot, shuffled) == settle(pot, guesses)


@given(pots, rounds())
def test_golden_rule_only_perfect_guessers_paid(pot: int, guesses: list[ScoredGuess]) -> None:
    perfect_players = {g.player for g in guesses if g.score == MAX_SCORE}
    if perfect_players and pot > 0:
        paid = {p.player for p in settle(pot, guesses)}
        assert paid <= perfect_players


def test_remainder_goes_to_the_earliest_best_guess() -> None:
    guesses = [
        ScoredGuess("JOB2", "bob", 300),
        ScoredGuess("JOB1", "ann", 300),
        ScoredGuess("JOB3", "ann", 100),
    ]
    # 100·300//700 = 42 twice, 100·100//700 = 14: 98, remainder 2 to JOB1 (ann).
    payouts = {p.player: (p.amount, p.guess_id) for p in settle(100, guesses)}
    assert payouts == {"ann": (58, "JOB1"), "bob": (42, "JOB2")}


def test_perfect_split_with_remainder() -> None:
    guesses = [
        ScoredGuess("JOB5", "bob", 600),
        ScoredGuess("JOB4", "cat", 600),
        ScoredGuess("JOB1", "ann", 580),
    ]
    payouts = {p.player: p.amount for p in settle(101, guesses)}
    assert payouts == {"cat": 51, "bob": 50}


def test_all_zero_scores_split_equally() -> None:
    guesses = [ScoredGuess(f"JOB{i}", p, 0) for i, p in enumerate(["a", "b", "c"])]
    assert {p.player: p.amount for p in settle(10, guesses)} == {"a": 4, "b": 3, "c": 3}


def test_misuse_is_refused() -> None:
    with pytest.raises(ValueError, match="unique"):
        settle(10, [ScoredGuess("JOB1", "a", 1), ScoredGuess("JOB1", "b", 2)])
    with pytest.raises(ValueError, match="score"):
        settle(10, [ScoredGuess("JOB1", "a", 601)])
    with pytest.raises(ValueError, match="pot"):
        settle(-1, [])
