"""The chaos command cannot pass empty (issue 25, item 10): its own minimums of work, checked
by the command (not only by its pytest wrapper)."""

from __future__ import annotations

import argparse

from codemojex.chaos.run import _parse, minimums, under_minimums


def _args(*argv: str) -> argparse.Namespace:
    return _parse(["--duration", "60", *argv])


def test_the_default_minimums_scale_with_the_run() -> None:
    least = minimums(_args())
    assert least == {"acked:single": 1200, "acked:cluster": 600, "charged:game": 60,
                     "charged:game-cluster": 60}
    assert minimums(_args("--no-cluster", "--no-game")) == {"acked:single": 1200}
    assert minimums(_args("--min-acked", "5", "--min-charged", "7", "--no-cluster")) == {
        "acked:single": 5, "charged:game": 7}


def test_a_run_under_a_minimum_is_named_and_one_that_did_its_work_is_not() -> None:
    least = {"acked:single": 100, "acked:cluster": 50, "charged:game": 10, "charged:game-cluster": 10}
    empty = {"queues": {"single": {"acked": 0}, "cluster": {"acked": 49}},
             "game": {"charged": 0}, "game_cluster": None}
    lines = under_minimums(empty, least)
    assert len(lines) == 4
    assert lines[0].startswith("queue single acknowledged 0 jobs, under the minimum 100")
    assert "game-cluster charged 0 guesses, under the minimum 10" in lines[3]
    busy = {"queues": {"single": {"acked": 100}, "cluster": {"acked": 50}},
            "game": {"charged": 10}, "game_cluster": {"charged": 11}}
    assert under_minimums(busy, least) == []
