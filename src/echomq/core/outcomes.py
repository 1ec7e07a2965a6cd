"""What a handler answers, and the backoff policy for failures. Pure."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

# Jitter from a generator of our own: a library never draws from (or perturbs) the
# process-wide `random` state its users and their test tools rely on.
_rng = random.Random()

__all__ = ["Ack", "Backoff", "BackoffPolicy", "Defer", "Outcome", "as_outcome"]


@dataclass(frozen=True, slots=True)
class Ack:
    """Done: complete the job (``None`` from a handler means the same)."""

    result: bytes = b""


@dataclass(frozen=True, slots=True)
class Defer:
    """Not now (a rate budget said so): run again after ``delay_ms``; no failure counted."""

    delay_ms: int


@dataclass(frozen=True, slots=True)
class Backoff:
    """A failure that may pass: retry after the policy's growing delay, counting a failure.
    ``give_up=True``: a failure that will not pass: the job is dead now, whatever its
    attempt limit (the ``retry`` script's mode ``dead``; typed tasks' ``give_up_on``)."""

    error: str = ""
    delay_ms: int | None = None  # None: the consumer's BackoffPolicy decides
    give_up: bool = False


Outcome = Ack | Defer | Backoff | None


def as_outcome(value: object) -> Outcome:
    """A handler's return value as its outcome: an outcome stays itself; bytes complete
    with those bytes as the result; a ``dict``, ``list``, ``str``, number or bool completes
    with its JSON (UTF-8) as the result (``json.loads(await q.result(id))`` reads it back).
    Anything else is a TypeError (a handler's mistake, logged by the consumer)."""
    if value is None or isinstance(value, Ack | Defer | Backoff):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return Ack(result=bytes(value))
    if isinstance(value, dict | list | str | int | float | bool):
        return Ack(result=json.dumps(value, separators=(",", ":")).encode())
    raise TypeError(f"handler returned {value!r}; expected Ack, Defer, Backoff, bytes or JSON")


@dataclass(frozen=True, slots=True, kw_only=True)
class BackoffPolicy:
    """Exponential backoff with jitter: ``base_ms * factor**(attempt-1)``, capped at ``max_ms``.

    Jitter spreads retries of jobs that failed together (an outage) so they do not
    return together.
    """

    base_ms: int = 1000
    factor: float = 2.0
    max_ms: int = 5 * 60_000
    jitter: float = 0.2

    def delay_ms(self, attempt: int) -> int:
        raw = min(self.max_ms, self.base_ms * self.factor ** max(0, attempt - 1))
        spread = raw * self.jitter
        return max(0, int(raw - spread + _rng.random() * 2 * spread))
