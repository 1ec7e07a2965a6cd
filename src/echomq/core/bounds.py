"""The documented range of every number a caller passes (the table is in echomq.protocol).

Pure. Outside its range a value raises :class:`~echomq.core.errors.InvalidArgument` before
any I/O; the scripts check the same ranges again (``EMQARG``).
"""

from __future__ import annotations

from echomq.core.errors import InvalidArgument, InvalidPayload, PayloadTooLarge

__all__ = [
    "MAX_ABOUT",
    "MAX_ATTEMPTS",
    "MAX_BEATS",
    "MAX_BEAT_MS",
    "MAX_COUNT",
    "MAX_DEDUPE_KEY",
    "MAX_DEDUPE_MS",
    "MAX_DELAY_MS",
    "MAX_ERROR",
    "MAX_KEEP_MS",
    "MAX_LANE",
    "MAX_LEASE_MS",
    "MAX_OFFSET",
    "MAX_PAGE",
    "MAX_PROGRESS",
    "MAX_RESULT",
    "MAX_RESULTS",
    "MAX_TTL_MS",
    "MAX_WINDOW",
    "MAX_WORKER_NAME",
    "OOM_ROOM",
    "check_bytes",
    "check_expiry",
    "check_int",
]

DAY_MS = 86_400_000
MAX_LEASE_MS = DAY_MS
MAX_DELAY_MS = 366 * DAY_MS
MAX_KEEP_MS = 366 * DAY_MS
# A dedupe window (throttle, debounce; docs/protocol.md "Dedupe windows") and its key: the
# entry lives at most this long, and its key is a name, not a document (the scripts check
# <= 800 bytes: 200 characters of UTF-8).
MAX_DEDUPE_MS = 31 * DAY_MS
MAX_DEDUPE_KEY = 200
MAX_BEAT_MS = 3_600_000
MAX_ATTEMPTS = 10_000
# Leases one heartbeat_batch call extends (the script refuses more: EMQARG): a consumer's
# beat of more leases sends one call per 256, each short (the server runs nothing else
# meanwhile; complete_batch's slices are the same size) and its unpack bounded.
MAX_BEATS = 256
MAX_PAGE = 10_000
MAX_COUNT = 10_000
MAX_WINDOW = 2 * MAX_COUNT + 64
MAX_OFFSET = 2**53
MAX_LANE = 256
MAX_PROGRESS = 65_536  # bytes of one progress report: a note, not a payload
# The bytes a draining (allow-oom) script keeps: the protocol's ceilings, checked again by
# the scripts (lua/include/bytes.lua; tests/echomq/test_bytes_bounded.py checks they agree).
# A queue may set lower limits (QueueOptions.max_result, max_error), never higher ones.
MAX_RESULT = 512 * 1024  # one job's result: as large as the default max_payload
MAX_RESULTS = 4 * 1024 * 1024  # the results of one complete_batch call together
MAX_ERROR = 64 * 1024  # one failed attempt's error text (failure_text writes ~4 KiB)
MAX_WORKER_NAME = 256  # a worker's registered name, bytes
MAX_ABOUT = 8 * 1024  # a worker's registered description (JSON), bytes
MAX_TTL_MS = DAY_MS  # a worker's registration without a beat
OOM_ROOM = 1024  # client bytes one call may still add past maxmemory (the stated slack)


def check_int(name: str, value: object, lo: int, hi: int) -> int:
    """``value`` if it is an int (not a bool) in ``lo..hi``, else InvalidArgument."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidArgument(f"{name} must be an int in {lo}..{hi}, not {type(value).__name__}")
    if not lo <= value <= hi:
        raise InvalidArgument(f"{name} must be in {lo}..{hi}, not {value}")
    return value


def check_expiry(expires_ms: object, delay_ms: int) -> int | None:
    """``expires_ms`` if it is None or an int in 1..MAX_DELAY_MS greater than ``delay_ms``
    (a job delayed past its own deadline could never run), else InvalidArgument
    (docs/decisions/0045-expiry.md)."""
    if expires_ms is None:
        return None
    check_int("expires_ms", expires_ms, 1, MAX_DELAY_MS)
    assert isinstance(expires_ms, int)
    if expires_ms <= delay_ms:
        raise InvalidArgument(f"expires_ms ({expires_ms}) must be more than delay_ms ({delay_ms}): "
                              "the job could never start")
    return expires_ms


def check_bytes(name: str, value: object, limit: int) -> bytes:
    """``value`` as bytes if it is bytes-like and at most ``limit`` long, else
    InvalidPayload (not bytes) or PayloadTooLarge (too long), before any I/O."""
    if not isinstance(value, bytes | bytearray | memoryview):
        raise InvalidPayload(f"{name} must be bytes, not {type(value).__name__}")
    data = bytes(value)
    if len(data) > limit:
        raise PayloadTooLarge(f"{name} of {len(data)} bytes exceeds its limit of {limit}")
    return data
