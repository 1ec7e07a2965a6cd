"""Branded ids: a three-letter kind, then a time-ordered, collision-free tail. Pure.

``JOB01JH3Q8Z6N4Y2T9X0B5C7D8E9F`` is ``JOB`` followed by a 26-character
Crockford base32 tail: 48 bits of Unix milliseconds, then 80 bits that are
random for the first id of a millisecond and incremented for each further id
of the same millisecond in the same process. So ids

* sort by creation time as strings, also within one millisecond in one process,
* are unique across processes (80 random bits per process and millisecond; a
  forked child draws afresh, :func:`os.register_at_fork`),
* hold only ``[0-9A-Z]``: no ``{``, ``}``, ``:`` or anything a key must not hold.

The id is minted at the moment of acceptance and is both the job key and the
idempotency key.

Minting is cheap (under half a microsecond of client CPU per id, ``bench/ids_cpu.py``)
because nothing is encoded per id: the tail is ``millisecond (10 characters) +
high 70 random bits (14) + low 10 bits (2)``; the first 24 characters are encoded
once per millisecond or per 1,024 ids and the last two come from a table, joined to
the kind and head by one C call per id (see :func:`_minter`).
:func:`generate_many` mints a whole batch under one lock and one clock read.

Derived ids (:func:`derive_id`): an id determined by a business key, so that the
admission's duplicate refusal makes a job idempotent on keys users already have
(``"order-42"`` gives the same ``JOB`` id every time). The tail is ``ms48 << 80 | h80``:
``h80`` is the first 80 bits of ``sha256(namespace + "\\0" + key)`` and ``ms48`` is
``at_ms`` if given, else the key's own millisecond when the key is itself a branded id
(so ids derived from ids still sort by time), else 0.
"""

from __future__ import annotations

import hashlib
import itertools
import operator
import os
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterator

from echomq.core.errors import InvalidArgument, InvalidJobId

__all__ = [
    "ALPHABET",
    "KIND_LENGTH",
    "MAX_KEY_LENGTH",
    "TAIL_LENGTH",
    "derive_id",
    "generate",
    "generate_many",
    "kind_of",
    "timestamp_ms",
    "valid",
]

ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford base32: sorts like the numbers it encodes
KIND_LENGTH = 3
TAIL_LENGTH = 26
_RANDOM_BITS = 80
_MAX_MS = (1 << 48) - 1
MAX_KEY_LENGTH = 4096  # characters of a business key or namespace: a key, not a document
_LOW_BITS = 10  # the last two characters, taken from _PAIRS
_LOW_SPAN = 1 << _LOW_BITS
_KIND = re.compile(r"[A-Z]{3}")
_ID = re.compile(rf"[A-Z]{{3}}[0-7][{ALPHABET}]{{25}}")
# Every 10-bit value as its two base32 characters, in order.
_PAIRS = tuple(a + b for a in ALPHABET for b in ALPHABET)
_known_kinds: set[str] = set()  # at most 26**3 entries
# (first ns after the ms, kind -> iterator of the block's ids, ms, high bits, head, start low)
_State = tuple[int, dict[str, Iterator[str]], int, int, str, int]


def _encode(value: int, chars: int) -> str:
    """``value`` as ``chars`` (even) base32 characters, most significant first."""
    out = []
    for _ in range(chars // 2):
        out.append(_PAIRS[value & 1023])
        value >>= 10
    return "".join(reversed(out))


def _check_kind(kind: object) -> None:
    if not isinstance(kind, str) or not _KIND.fullmatch(kind):
        raise InvalidArgument(f"an id kind is three uppercase ASCII letters, not {kind!r}")
    if type(kind) is str:
        _known_kinds.add(kind)


def _minter(
    clock: Callable[[], int] = time.time_ns, randbits: Callable[[int], int] = secrets.randbits
) -> tuple[Callable[[str], str], Callable[[str, int], list[str]], Callable[[], None]]:
    """The per-process minting state, in closure cells (the fastest variables CPython reads).

    ``state`` is one tuple (``_State``) replaced as a whole: the first nanosecond after
    its millisecond, a dict from kind to an iterator of that kind's remaining ids of the
    current block, the millisecond, the block's high bits, its 24-character head and
    the low value a kind's first iterator in the block starts at. An iterator is
    ``map(operator.add, repeat(kind + head), pairs[start:])``: ``next()`` on it yields a
    whole id in one C call (atomic under the GIL; ``operator.add`` is a plain C function,
    about 0.04 µs an id cheaper than the bound ``__add__`` method-wrapper), so the common
    path takes no lock and builds no string in Python. A new millisecond, a new kind, a
    used-up block and every batch go through ``lock``. Each (kind, block) has at most one
    iterator ever, so no two calls get the same id; calls that do not overlap get
    increasing ids; overlapping calls may get either order (both are correct). ``clock``
    and ``randbits`` are parameters so tests can hold a millisecond still.
    """
    lock = threading.Lock()
    pairs = _PAIRS
    state: _State = (-1, {}, -1, 0, "", 0)

    def block(ms: int, hi: int, start: int) -> _State:
        return ((ms + 1) * 1_000_000, {}, ms, hi, _encode(ms, 10) + _encode(hi, 14), start)

    def fresh(ms: int) -> _State:
        # A new millisecond: 79 random bits (leaving 2**79 increments of headroom).
        rand = randbits(_RANDOM_BITS - 1)
        return block(ms, rand >> _LOW_BITS, rand & (_LOW_SPAN - 1))

    def after(st: _State) -> _State:
        # The block after ``st``: the next high value, or past 80 bits the next millisecond.
        hi = st[3] + 1
        if hi >> (_RANDOM_BITS - _LOW_BITS):
            return fresh(st[2] + 1)
        return block(st[2], hi, 0)

    def current() -> _State:
        # Under the lock: the state to mint from, renewed if the clock has moved on.
        nonlocal state
        now = clock() // 1_000_000
        if now > state[2]:
            state = fresh(now)
        return state

    def slow(kind: str) -> str:
        nonlocal state
        if type(kind) is not str or kind not in _known_kinds:
            _check_kind(kind)
        with lock:
            st = current()
            while True:
                it = st[1].get(kind)
                if it is None:
                    it = map(operator.add, itertools.repeat(kind + st[4]), pairs[st[5] :])
                    if type(kind) is str:  # a str subclass gets no iterator of its own
                        st[1][kind] = it
                minted = next(it, None)
                if minted is not None:
                    return minted
                st = state = after(st)  # the block is used up (also by other threads)

    def generate(kind: str) -> str:
        """Mint a new branded id of ``kind`` (three uppercase ASCII letters, e.g. ``"JOB"``)."""
        st = state
        if clock() < st[0]:  # same millisecond (or the clock stepped back)
            try:
                return next(st[1][kind])
            except (KeyError, StopIteration, TypeError):  # new kind, used-up block, not a kind
                pass
        return slow(kind)

    def generate_many(kind: str, n: int) -> list[str]:
        """Mint ``n`` ids of ``kind`` at once, in order, under one lock and one clock read.

        The batch takes whole fresh blocks after the current one, so it is built by
        slicing the table of low values, not id by id.
        """
        nonlocal state
        if type(kind) is not str or kind not in _known_kinds:
            _check_kind(kind)
        if type(n) is not int or n < 0:
            raise InvalidArgument(f"generate_many needs a count >= 0, not {n!r}")
        out: list[str] = []
        if not n:
            return out
        with lock:
            st = current()
            while True:
                st = after(st)
                take = min(n - len(out), _LOW_SPAN)
                prefix = kind + st[4]
                out += [prefix + p for p in pairs[:take]]
                if len(out) == n:
                    # Every kind goes on after the batch's last low value in its block.
                    state = (st[0], {}, st[2], st[3], st[4], take)
                    return out

    def after_fork() -> None:
        # The child must not continue its parent's sequence, nor inherit a held lock.
        nonlocal lock, state
        lock, state = threading.Lock(), (-1, {}, -1, 0, "", 0)

    return generate, generate_many, after_fork


generate, generate_many, _after_fork = _minter()
os.register_at_fork(after_in_child=_after_fork)


def valid(candidate: object) -> bool:
    """True if ``candidate`` is a well-formed branded id of any kind."""
    return isinstance(candidate, str) and _ID.fullmatch(candidate) is not None


def kind_of(branded: str) -> str:
    """The three-letter kind of a valid branded id."""
    if not valid(branded):
        raise InvalidJobId(f"not a branded id: {branded!r}")
    return branded[:KIND_LENGTH]


def timestamp_ms(branded: str) -> int:
    """The Unix millisecond at which ``branded`` was minted."""
    if not valid(branded):
        raise InvalidJobId(f"not a branded id: {branded!r}")
    return int(branded[KIND_LENGTH : KIND_LENGTH + 10].translate(_DECODE), 32)


_DECODE = str.maketrans(ALPHABET, "0123456789ABCDEFGHIJKLMNOPQRSTUV")


def derive_id(kind: str, key: str, *, namespace: str = "", at_ms: int | None = None) -> str:
    """The branded id of ``kind`` that business key ``key`` always maps to. Pure.

    ``derive_id("JOB", "order-42")`` is the same id in every process and every run, so
    admitting it twice is refused as a duplicate. ``namespace`` separates purposes that
    share keys (``derive_id("JOB", "order-42", namespace="invoice")`` differs). The id's
    time part is ``at_ms`` if given (e.g. a schedule's tick), else the key's own when the
    key is a branded id, else 0 (such ids sort before time-ordered ones in a queue's
    admission order: for business keys that must keep FIFO, admit ordinary ids with the
    key as ``dedupe_key=``, as typed tasks' ``key=`` does, docs/decisions/0043). Different
    keys collide with probability ~2**-80 per pair.

    Raises :class:`~echomq.core.errors.InvalidArgument` (a ValueError) for a kind that is not
    three uppercase ASCII letters, a key or namespace that is not a str (a key must not be
    empty; both at most :data:`MAX_KEY_LENGTH` characters) or an ``at_ms`` outside
    0..2**48-1.
    """
    if not isinstance(kind, str) or not _KIND.fullmatch(kind):
        raise InvalidArgument(f"an id kind is three uppercase ASCII letters, not {kind!r}")
    if not isinstance(key, str) or not 1 <= len(key) <= MAX_KEY_LENGTH:
        raise InvalidArgument(f"a business key is a str of 1..{MAX_KEY_LENGTH} characters, not {key!r:.80}")
    if not isinstance(namespace, str) or len(namespace) > MAX_KEY_LENGTH:
        raise InvalidArgument(f"a namespace is a str of at most {MAX_KEY_LENGTH} characters")
    if at_ms is None:
        ms = timestamp_ms(key) if valid(key) else 0
    elif type(at_ms) is int and 0 <= at_ms <= _MAX_MS:
        ms = at_ms
    else:
        raise InvalidArgument(f"at_ms must be an int in 0..2**48-1, not {at_ms!r}")
    digest = hashlib.sha256(f"{namespace}\0{key}".encode("utf-8", "surrogatepass")).digest()
    value = (ms << _RANDOM_BITS) | int.from_bytes(digest[:10], "big")
    return kind + _encode(value, TAIL_LENGTH)
