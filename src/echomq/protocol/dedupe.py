"""Dedupe windows (docs/protocol.md "Dedupe windows"; issue 28 item 2). Pure.

An admission with ``dedupe_ms`` takes a *dedupe key* (``dedupe_key``, else the job's id)
for that long, whatever becomes of the job's row: ``emq:{q}:dd:<key>``, a string holding
the holder's id with the window as its TTL, so an entry never outlives its window
(at most :data:`~echomq.core.bounds.MAX_DEDUPE_MS`). Two modes, one script each:

* ``throttle`` (``throttle.lua``): the first admission in the window wins; later ones
  answer DUPLICATE and write nothing.
* ``debounce`` (``debounce.lua``): a later admission replaces the payload of the holder
  while it still waits (pending or delayed) and moves its due time to now + ``delay_ms``
  (REPLACED); a holder that runs or ended is left alone and the new job is admitted. Every
  debounced job is on a serial lane (the caller's, which must be serial, else
  :func:`dedupe_lane` of the key), so a new job waits for a running holder
  (BullMQ's keep-last-if-active).

Every check here runs before any I/O; the scripts check the same again (``EMQARG``,
``EMQKEYS``).
"""

from __future__ import annotations

from dataclasses import dataclass

from echomq.core.bounds import MAX_DEDUPE_KEY, MAX_DEDUPE_MS, check_int
from echomq.core.errors import InvalidArgument

__all__ = ["MODES", "Window", "check_window", "dedupe_lane"]

MODES = ("throttle", "debounce")


@dataclass(frozen=True, slots=True)
class Window:
    """A checked dedupe window: its length, its key (None: the job's id) and mode."""

    ms: int
    key: str | None
    mode: str


def check_window(ms: object, key: object, mode: object) -> Window | None:
    """The window of ``admit(dedupe_ms=, dedupe_key=, dedupe_mode=)``, or None when none is
    asked for. InvalidArgument for a window outside 1..MAX_DEDUPE_MS, a key or mode given
    without a window, a key that is not a str of 1..MAX_DEDUPE_KEY characters, or an
    unknown mode."""
    if ms is None:
        if key is not None or mode is not None:
            raise InvalidArgument("dedupe_key and dedupe_mode need a window: give dedupe_ms too")
        return None
    n = check_int("dedupe_ms", ms, 1, MAX_DEDUPE_MS)
    if key is not None and (type(key) is not str or not 1 <= len(key) <= MAX_DEDUPE_KEY
                            or (not key.isprintable() and _unencodable(key))):
        raise InvalidArgument(
            f"dedupe_key must be None or a str of 1..{MAX_DEDUPE_KEY} characters of UTF-8, "
            f"not {key!r:.80}")
    if mode is None:
        mode = "throttle"
    if type(mode) is not str or mode not in MODES:
        raise InvalidArgument(f"dedupe_mode must be one of {MODES}, not {mode!r:.80}")
    return Window(ms=n, key=key, mode=mode)


def _unencodable(key: str) -> bool:
    try:
        key.encode()
    except UnicodeEncodeError:  # a lone surrogate: no key name holds it
        return True
    return False


def dedupe_lane(key: str) -> str:
    """The serial lane a debounced job without a lane of its own goes on: ``dd:<key>``
    (at most 203 characters, within a lane's 256)."""
    return "dd:" + key
