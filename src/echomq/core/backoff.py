"""Back-off between tries of one call: the helper every retry loop waits with. Pure.

A loop that retries a refused call waits a little, then longer: the first pause is
``first_s``, each next one ``factor`` times the previous, never more than ``cap_s``.
``jitter=(low, high)`` draws each pause from ``low``..``high`` times its step, so that
clients refused together (an outage, a failover) do not come back together. After a
success the loop calls :meth:`BackoffDelays.reset` and starts again from ``first_s``.

Who waits with it: the connectors' retry budget (``client/_async/connector.py``,
``client/_async/cluster.py``), the consumer's refusal episodes (``client/replies.py``) and
its finishing writes (``runtime/finishing.py``), and the game's wallet transactions and
Telegram polling. A *job's* retry delay by attempt is :class:`~echomq.BackoffPolicy`
(``core/outcomes.py``), which the consumer applies through the queue, not by waiting.
"""

from __future__ import annotations

import random

from echomq.core.errors import InvalidArgument

__all__ = ["BackoffDelays"]


class BackoffDelays:
    """The pauses of one retry loop: ``next(delays)`` is the pause to wait now.

    ``step`` is the un-jittered pause the next ``next()`` draws from (a loop with a
    deadline compares it before waiting).
    """

    __slots__ = ("_rng", "cap_s", "factor", "first_s", "jitter", "step")

    def __init__(self, first_s: float, cap_s: float, *, factor: float = 2.0,
                 jitter: tuple[float, float] = (1.0, 1.0), rng: random.Random | None = None) -> None:
        if not 0 < first_s <= cap_s:
            raise InvalidArgument(f"back-off needs 0 < first_s <= cap_s, got {first_s} and {cap_s}")
        if factor < 1:
            raise InvalidArgument(f"back-off factor must be >= 1, got {factor}")
        if not 0 <= jitter[0] <= jitter[1]:
            raise InvalidArgument(f"back-off jitter must be (low, high) with 0 <= low <= high, got {jitter}")
        self.first_s, self.cap_s, self.factor, self.jitter = first_s, cap_s, factor, jitter
        self.step = first_s
        # Jitter from a generator of its own: a library never draws from (or perturbs) the
        # process-wide `random` state its users and their test tools rely on. Made on the
        # first jittered draw: seeding one reads 2.5 kB of os.urandom, and most loops (a
        # consumer's finishing write per job) never wait at all.
        self._rng = rng

    def __iter__(self) -> BackoffDelays:
        return self

    def __next__(self) -> float:
        low, high = self.jitter
        if low == high:
            pause = self.step * low
        else:
            if self._rng is None:
                self._rng = random.Random()
            pause = self.step * self._rng.uniform(low, high)
        self.step = min(self.step * self.factor, self.cap_s)
        return pause

    def reset(self) -> None:
        """Start again from ``first_s`` (the call succeeded, or a new episode began)."""
        self.step = self.first_s
