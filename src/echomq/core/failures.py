"""A failed attempt's error as the job's row keeps it: type, message, bounded traceback.

The row's ``error`` field holds one text (the ``retry`` script stores it as given)::

    ValueError: the message (first line: type and message, the message cut at 1,000 chars)
    Traceback (most recent call last):
      ...                   (the traceback's last 3,000 characters at most)
    ValueError: the message

:func:`failure_text` writes it; :func:`parse_failure` reads it back (also the plain
texts other paths write, such as ``lease expired``).
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass

__all__ = ["MAX_MESSAGE", "MAX_TRACEBACK", "LastError", "clip", "failure_text", "parse_failure"]

MAX_MESSAGE = 1000
MAX_TRACEBACK = 3000
_TB_HEAD = "Traceback (most recent call last):"


@dataclass(frozen=True, slots=True)
class LastError:
    type: str
    message: str
    traceback: str


def failure_text(exc: BaseException) -> str:
    """The row text of ``exc``: ``Type: message`` then its traceback, both bounded."""
    message = " ".join(str(exc).split())[:MAX_MESSAGE]
    head = f"{type(exc).__qualname__}: {message}" if message else type(exc).__qualname__
    tb = "".join(traceback.format_exception(exc)).rstrip("\n")
    if len(tb) > MAX_TRACEBACK:
        tb = f"{_TB_HEAD}\n  ...\n" + tb[-MAX_TRACEBACK:].split("\n", 1)[-1]
    return f"{head}\n{tb}" if tb.startswith(_TB_HEAD) else head


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` bytes of UTF-8 (whole characters): what a consumer
    hands ``retry`` so a handler's long error never makes the retry itself fail."""
    if len(text) * 4 <= limit:
        return text
    return text.encode(errors="surrogatepass")[:limit].decode(errors="ignore")


def parse_failure(text: str | bytes) -> LastError:
    """Split a row's ``error`` back into type, message and traceback ('' where absent)."""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    head, _, tb = text.partition("\n")
    kind, sep, message = head.partition(": ")
    if not sep or " " in kind:
        kind, message = (head, "") if head.isidentifier() else ("", head)
    return LastError(type=kind, message=message, traceback=tb)
