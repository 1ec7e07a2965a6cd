"""The one back-off helper (echomq.core.backoff): its pauses, and that no retry loop in
src/ grows its own."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from echomq import BackoffDelays, InvalidArgument

SRC = Path(__file__).resolve().parents[2] / "src"


def test_pauses_double_up_to_the_cap_and_reset_starts_over() -> None:
    delays = BackoffDelays(0.05, 0.3)
    assert [next(delays) for _ in range(5)] == [0.05, 0.1, 0.2, 0.3, 0.3]
    delays.reset()
    assert delays.step == 0.05 and next(delays) == 0.05


def test_the_factor_sets_the_growth() -> None:
    delays = BackoffDelays(1.0, 100.0, factor=3.0)
    assert [next(delays) for _ in range(4)] == [1.0, 3.0, 9.0, 27.0]


def test_jitter_draws_each_pause_within_its_bounds_of_the_step() -> None:
    delays = BackoffDelays(0.02, 1.0, jitter=(0.5, 1.5), rng=random.Random(7))
    pauses, steps = [], []
    for _ in range(200):
        steps.append(delays.step)
        pauses.append(next(delays))
    assert all(0.5 * s <= p <= 1.5 * s for p, s in zip(pauses, steps, strict=True))
    assert steps[-1] == 1.0
    assert len({round(p / s, 6) for p, s in zip(pauses, steps, strict=True)}) > 100  # drawn, not fixed


def test_its_own_generator_leaves_the_process_random_state_alone() -> None:
    random.seed(1)
    expected = random.random()
    random.seed(1)
    delays = BackoffDelays(0.1, 1.0, jitter=(0.5, 1.5))
    for _ in range(10):
        next(delays)
    assert random.random() == expected


@pytest.mark.parametrize(("args", "kwargs"), [
    ((0.0, 1.0), {}), ((2.0, 1.0), {}), ((0.1, 1.0), {"factor": 0.5}),
    ((0.1, 1.0), {"jitter": (1.5, 0.5)}), ((0.1, 1.0), {"jitter": (-0.1, 1.0)}),
])
def test_a_bad_argument_is_refused(args: tuple[float, float], kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidArgument):
        BackoffDelays(*args, **kwargs)  # type: ignore[arg-type]


# A hand-rolled exponential back-off: a delay doubled up to a cap (``min(delay * 2, cap)``),
# doubled in place (``delay *= 2``) or a power of two of a counter (``2 ** (n - 1)``).
HAND_ROLLED = re.compile(r"min\(\s*[\w.]+\s*\*\s*2\s*,|[\w.]+\s*\*=\s*2\b|\b2\s*\*\*\s*\(")


def test_the_pattern_finds_a_hand_rolled_back_off() -> None:
    for line in ("delay = min(delay * 2, 1.0)", "self._delay = min(self._delay * 2, self.cap_s)",
                 "wait *= 2", "return int(min(60_000, 1000 * 2 ** (n - 1)))"):
        assert HAND_ROLLED.search(line), line
    for line in ("deadline = t0 + 120 + (a.round_seconds * 2 if game else 0)", "x = min(a, b * 2)"):
        assert not HAND_ROLLED.search(line), line


def test_no_retry_loop_in_src_grows_its_own_back_off() -> None:
    hits = [f"{p.relative_to(SRC)}:{n}: {line.strip()}"
            for p in sorted(SRC.rglob("*.py")) if "egg-info" not in str(p)
            for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            if HAND_ROLLED.search(line)]
    why = "use echomq.BackoffDelays (or BackoffPolicy for a job's retry delay)"
    assert hits == [], why + ":\n" + "\n".join(hits)
