"""A sharded queue's rate limit as shares of one budget, pure (no I/O)
(docs/decisions/0031-sharded-gate.md).

A limit of ``M`` leases per ``W`` ms on a queue of ``N`` shards is kept as N shard limits
``m_i`` per ``W`` with ``sum(m_i) == M`` and every ``m_i >= 1`` (so ``M >= N``), each
enforced exactly by its shard's own claim gate. Since a sliding-window gate lets no
window of its shard hold more than the largest share it had during that window, and a
rebalance lowers shares first and raises them only a window (plus a clock margin) after
the lowering ended, no window of ``W`` ms ever holds more than ``M`` leases of the logical
queue: the error bound is zero, given node clocks that agree within :data:`MARGIN_MS`.

The shares follow demand: one each, the other ``M - N`` in proportion to the shards'
pending jobs (largest remainders, ties to the lower index; all idle: evenly, the first
``M % N`` shards one more).
"""

from __future__ import annotations

from collections.abc import Sequence

from echomq.core.errors import InvalidArgument

__all__ = ["MARGIN_MS", "check_budget", "moved", "parse_plan", "split", "worth_moving"]

MARGIN_MS = 250
"""Added to the window before shares are raised: covers clock differences between the
node that times the wait (the queue's home slot) and the shards' nodes."""


def check_budget(max_: int, shards: int) -> None:
    """InvalidArgument unless every shard can hold a share of at least one lease."""
    if max_ < shards:
        raise InvalidArgument(
            f"a sharded queue's rate max must be at least its shard count ({shards}), not "
            f"{max_}: a shard with no share could never lease (use a longer window, e.g. "
            f"{shards}/{shards}x the window)")


def split(total: int, demand: Sequence[int]) -> list[int]:
    """``total`` leases as shares: one each, the rest by ``demand`` (see the module)."""
    n = len(demand)
    check_budget(total, n)
    rest, weight = total - n, sum(max(0, d) for d in demand)
    if weight == 0:
        return [1 + rest // n + (1 if i < rest % n else 0) for i in range(n)]
    exact = [rest * max(0, d) / weight for d in demand]
    out = [int(x) for x in exact]
    order = sorted(range(n), key=lambda i: (-(exact[i] - out[i]), i))
    for i in order[: rest - sum(out)]:
        out[i] += 1
    return [1 + x for x in out]


def moved(current: Sequence[int | None], target: Sequence[int]) -> int:
    """How many leases of budget a change from ``current`` to ``target`` moves (a shard
    with no limit yet counts as having the target)."""
    return sum(max(0, t - c) for c, t in zip(current, target, strict=True) if c is not None)


def worth_moving(current: Sequence[int | None], target: Sequence[int]) -> bool:
    """Rebalance only when it moves a quarter of the spare budget (at least one lease):
    each rebalance costs the growing shards a window at their lower share. A shard with
    no limit (set before the shard was, or lost) is always worth it."""
    if any(c is None for c in current):
        return True
    spare = sum(target) - len(target)
    return spare > 0 and moved(current, target) >= max(1, spare // 4)


def parse_plan(text: str, shards: int) -> list[int] | None:
    """A plan as recorded (``"7 1 1"``), or None if it is not one for ``shards``."""
    try:
        plan = [int(x) for x in text.split()]
    except ValueError:
        return None
    return plan if len(plan) == shards and all(x >= 1 for x in plan) else None
