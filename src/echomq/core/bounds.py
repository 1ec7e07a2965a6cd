"""The documented range of every number a caller passes (the table is in echomq.protocol).

Pure. Outside its range a value raises :class:`~echomq.core.errors.InvalidArgument` before
any I/O; the scripts check the same ranges again (``EMQARG``).
"""

from __future__ import annotations

from echomq.core.errors import InvalidArgument

__all__ = [
    "MAX_ATTEMPTS",
    "MAX_BEAT_MS",
    "MAX_COUNT",
    "MAX_DELAY_MS",
    "MAX_KEEP_MS",
    "MAX_LANE",
    "MAX_LEASE_MS",
    "MAX_OFFSET",
    "MAX_PAGE",
    "MAX_PROGRESS",
    "MAX_WINDOW",
    "check_int",
]

DAY_MS = 86_400_000
MAX_LEASE_MS = DAY_MS
MAX_DELAY_MS = 366 * DAY_MS
MAX_KEEP_MS = 366 * DAY_MS
MAX_BEAT_MS = 3_600_000
MAX_ATTEMPTS = 10_000
MAX_PAGE = 10_000
MAX_COUNT = 10_000
MAX_WINDOW = 2 * MAX_COUNT + 64
MAX_OFFSET = 2**53
MAX_LANE = 256
MAX_PROGRESS = 65_536  # bytes of one progress report: a note, not a payload


def check_int(name: str, value: object, lo: int, hi: int) -> int:
    """``value`` if it is an int (not a bool) in ``lo..hi``, else InvalidArgument."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidArgument(f"{name} must be an int in {lo}..{hi}, not {type(value).__name__}")
    if not lo <= value <= hi:
        raise InvalidArgument(f"{name} must be in {lo}..{hi}, not {value}")
    return value
