"""Branded ids: a three-letter kind, then a time-ordered, collision-free tail. Pure.

``JOB01JH3Q8Z6N4Y2T9X0B5C7D8E9F`` is ``JOB`` followed by a 26-character
Crockford base32 tail: 48 bits of Unix milliseconds, then 80 bits that are
random for the first id of a millisecond and incremented for each further id
of the same millisecond in the same process. So ids

* sort by creation time as strings, also within one millisecond in one process,
* are unique across processes (80 random bits per process and millisecond),
* hold only ``[0-9A-Z]``: no ``{``, ``}``, ``:`` or anything a key must not hold.

The id is minted at the moment of acceptance and is both the job key and the
idempotency key.
"""

from __future__ import annotations

import os
import re
import secrets
import threading
import time

__all__ = ["ALPHABET", "KIND_LENGTH", "TAIL_LENGTH", "generate", "kind_of", "timestamp_ms", "valid"]

ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford base32: sorts like the numbers it encodes
KIND_LENGTH = 3
TAIL_LENGTH = 26
_RANDOM_BITS = 80
_KIND = re.compile(r"[A-Z]{3}")
_ID = re.compile(rf"[A-Z]{{3}}[0-7][{ALPHABET}]{{25}}")

_lock = threading.Lock()
_last_ms = -1
_last_rand = 0
_pid = os.getpid()


def _encode(value: int) -> str:
    out = []
    for _ in range(TAIL_LENGTH):
        out.append(ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(out))


def _next_tail() -> int:
    global _last_ms, _last_rand, _pid
    with _lock:
        now = time.time_ns() // 1_000_000
        if os.getpid() != _pid:  # a forked child must not continue its parent's sequence
            _pid, _last_ms = os.getpid(), -1
        if now > _last_ms:
            _last_ms, _last_rand = now, secrets.randbits(_RANDOM_BITS - 1)
        else:
            # Same millisecond (or the clock stepped back): keep order by incrementing.
            # Starting below 2**79 leaves 2**79 increments of headroom.
            _last_rand += 1
            if _last_rand >= 1 << _RANDOM_BITS:
                _last_ms, _last_rand = _last_ms + 1, secrets.randbits(_RANDOM_BITS - 1)
        return (_last_ms << _RANDOM_BITS) | _last_rand


def generate(kind: str) -> str:
    """Mint a new branded id of ``kind`` (three uppercase ASCII letters, e.g. ``"JOB"``)."""
    if not isinstance(kind, str) or not _KIND.fullmatch(kind):
        raise ValueError(f"an id kind is three uppercase ASCII letters, not {kind!r}")
    return kind + _encode(_next_tail())


def valid(candidate: object) -> bool:
    """True if ``candidate`` is a well-formed branded id of any kind."""
    return isinstance(candidate, str) and _ID.fullmatch(candidate) is not None


def kind_of(branded: str) -> str:
    """The three-letter kind of a valid branded id."""
    if not valid(branded):
        raise ValueError(f"not a branded id: {branded!r}")
    return branded[:KIND_LENGTH]


def timestamp_ms(branded: str) -> int:
    """The Unix millisecond at which ``branded`` was minted."""
    if not valid(branded):
        raise ValueError(f"not a branded id: {branded!r}")
    value = 0
    for ch in branded[KIND_LENGTH:]:
        value = value * 32 + ALPHABET.index(ch)
    return value >> _RANDOM_BITS
