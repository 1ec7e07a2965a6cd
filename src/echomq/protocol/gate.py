"""The claim gate, pure (no I/O): pause, rate limits and priorities, as values, calls and
decoders (docs/decisions/0022-claim-gate.md).

The gate itself runs in Lua (``lua/include/gate.lua``, run by ``claim``): a paused queue
leases nothing; a rate limit holds a job back (it stays pending, no attempt counted) and
the claim's reply says when the next token is due (:class:`Claimed`). Limits are kept in
the queue's meta hash, so every consumer of the queue obeys the same ones, on the
server's clock. Priorities are levels 0..:data:`MAX_PRIORITY` given at admission.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from echomq.core.bounds import check_int
from echomq.core.errors import InvalidArgument
from echomq.core.model import Lease

__all__ = ["MAX_LANE_RATE", "MAX_PRIORITY", "MAX_RATE", "PRIORITY_AGE", "Claimed", "Gate",
           "RateLimit", "check_priority", "decode_gate"]

MAX_PRIORITY = 3  # levels 0 (default) .. 3 (claimed first): a small number, as peers use
PRIORITY_AGE = 1000  # virtual-time ticks a level is worth (lua/include/pend.lua: AGE)
MAX_RATE = 1_000_000  # leases per window for a queue (the log is a list of that length)
MAX_LANE_RATE = 100  # leases per window for one lane (its log is one hash field)
MAX_RATE_MS = 86_400_000


@dataclass(frozen=True, slots=True)
class RateLimit:
    """At most ``max`` leases in any window of ``per_ms`` milliseconds (server clock)."""

    max: int
    per_ms: int

    def __post_init__(self) -> None:
        check_int("per_ms", self.per_ms, 1, MAX_RATE_MS)
        check_int("max", self.max, 1, MAX_RATE)

    @classmethod
    def parse(cls, text: str) -> RateLimit:
        """``"30/1s"``, ``"1/1100ms"``, ``"100/1m"``: max per window."""
        try:
            n, _, window = text.strip().partition("/")
            units = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}
            unit = next(u for u in ("ms", "s", "m", "h") if window.endswith(u))
            return cls(int(n), int(window[: -len(unit)] or "1") * units[unit])
        except (ValueError, StopIteration):
            raise InvalidArgument(f"a rate is <max>/<window> like 30/1s or 1/1100ms, not {text!r}") from None


@dataclass(frozen=True, slots=True)
class Gate:
    """A queue's claim gate as the server holds it."""

    paused: bool
    rate: RateLimit | None
    lane_rate: RateLimit | None


def decode_gate(reply: Any) -> Gate:
    if isinstance(reply, BaseException):
        raise reply
    paused, qmax, qms, lmax, lms = (int(x) for x in reply)
    return Gate(paused=bool(paused), rate=RateLimit(qmax, qms) if qmax else None,
                lane_rate=RateLimit(lmax, lms) if lmax else None)


def check_priority(priority: object) -> int:
    return check_int("priority", priority, 0, MAX_PRIORITY)


def check_lane_rate(limit: RateLimit | None) -> RateLimit | None:
    if limit is not None and limit.max > MAX_LANE_RATE:
        raise InvalidArgument(f"a lane's rate max must be 1..{MAX_LANE_RATE}, not {limit.max}")
    return limit


class Claimed(list[Lease]):
    """The leases one claim took (it *is* that list), and why it took no more:
    ``paused`` (the queue is paused) or ``wait_ms`` (a rate limit held a job back; the
    next token is due in that many ms on the server clock). Both unset: nothing held."""

    paused: bool
    wait_ms: int | None

    def __init__(self, leases: list[Lease], *, paused: bool = False, wait_ms: int | None = None) -> None:
        super().__init__(leases)
        self.paused = paused
        self.wait_ms = wait_ms

    def __repr__(self) -> str:
        return f"Claimed({list.__repr__(self)}, paused={self.paused}, wait_ms={self.wait_ms})"
