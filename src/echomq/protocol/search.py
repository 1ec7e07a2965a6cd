"""Search over a queue's jobs, pure: the query, the cursor, the two calls of a window and
their decoders (docs/decisions/0037-search.md).

A search walks the state sets in a fixed order (pending, active, delayed, done, dead, or
the states asked for), each in set order (score, then id), one *window* at a time: the
``search`` script examines at most ``budget`` entries after the cursor and returns those
whose id is in the query's id range (its id prefix and admission time range: an id's first
ten characters after the kind are its admission millisecond), then ``search_rows`` reads
the rows of those candidates (never a payload) and keeps the ones whose lane and error
match. Two script calls per window, each O(log n + budget) whatever the set's size.

The cursor is text: ``<state>/<score>/<id>`` of the last entry examined (or ``<state>//``
at a state's start). Resuming from it never repeats an entry still in place and never skips
one that stayed in its set; a job that moved between states meanwhile may be seen in both
or in neither (as with SCAN).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from echomq.core.bounds import check_int
from echomq.core.errors import InvalidArgument
from echomq.core.ids import ALPHABET, KIND_LENGTH, TAIL_LENGTH
from echomq.protocol.calls import Call, layout
from echomq.protocol.codes import check_lane
from echomq.protocol.decoders import text
from echomq.protocol.keyspace import STATES, QueueKeys

__all__ = ["MAX_BUDGET", "ROWS_PER_CALL", "SearchHit", "SearchQuery", "Window", "decode_hits",
           "decode_window", "search", "search_rows"]

MAX_BUDGET = 500
"""Entries one window's ``search`` call may examine: the bound of that call's work
(~2,600 instructions an entry, bench/search_ir.py)."""
ROWS_PER_CALL = 32
"""Candidates one ``search_rows`` call reads: a window's candidates go as several calls in
one flush, each bounded (~20-28k instructions a candidate, bench/search_ir.py), so no
call holds the server long however large the window."""
_MAX_MS = (1 << 48) - 1
_TOP = ALPHABET[-1]


def _ms_prefix(ms: int) -> str:
    """The ten characters an id minted at ``ms`` starts its tail with."""
    out = []
    for _ in range(10):
        out.append(ALPHABET[ms & 31])
        ms >>= 5
    return "".join(reversed(out))


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchQuery:
    """What to find. Every filter is optional; all given must hold.

    ``states``: which state sets to walk, in this order (default all five); ``lane``: the
    job's lane; ``error_type``: the type its last error names (``ValueError``);
    ``text``: a plain, case-sensitive text its error's first line holds; ``since_ms`` /
    ``until_ms``: its admission time (Unix ms, both inclusive) as its id carries it: ids
    made by ``generate()`` carry their minting time, ids ``derive_id`` made carry ``at_ms``
    (0 without one: such jobs fall outside every time range that starts after 1970);
    ``id_prefix``: the start of its id."""

    states: tuple[str, ...] = STATES
    lane: str | None = None
    error_type: str = ""
    text: str = ""
    since_ms: int | None = None
    until_ms: int | None = None
    id_prefix: str = ""

    def __post_init__(self) -> None:
        given = self.states
        if not isinstance(given, tuple) or not given or len(set(given)) != len(given) \
                or any(s not in STATES for s in given):
            raise InvalidArgument(f"states must be a tuple of distinct states of {STATES}, not {given!r}")
        check_lane(self.lane)
        for name in ("error_type", "text", "id_prefix"):
            value = getattr(self, name)
            if not isinstance(value, str) or len(value) > 1000:
                raise InvalidArgument(f"{name} must be a str of at most 1000 characters, not {value!r:.80}")
        if self.error_type and ("\n" in self.error_type or ":" in self.error_type):
            raise InvalidArgument("error_type is a type's name (no ':' or newline)")
        if len(self.id_prefix) > KIND_LENGTH + TAIL_LENGTH:
            raise InvalidArgument(f"id_prefix longer than an id: {self.id_prefix!r}")
        for name in ("since_ms", "until_ms"):
            value = getattr(self, name)
            if value is not None:
                check_int(name, value, 0, _MAX_MS)

    def id_range(self) -> tuple[str, str]:
        """The ids the query can match as a string range [low, high] ('' for no bound); a
        range with low > high matches nothing."""
        lows, highs = [], []
        full = KIND_LENGTH + TAIL_LENGTH
        if self.id_prefix:
            lows.append(self.id_prefix)
            highs.append(self.id_prefix + _TOP * (full - len(self.id_prefix)))
        if self.since_ms is not None:
            lows.append("JOB" + _ms_prefix(self.since_ms))
        if self.until_ms is not None:
            highs.append("JOB" + _ms_prefix(self.until_ms) + _TOP * (TAIL_LENGTH - 10))
        return (max(lows) if lows else "", min(highs) if highs else "")

    def filters_rows(self) -> bool:
        """True when a candidate's row must be read (a lane or error filter)."""
        return bool(self.lane or self.error_type or self.text)


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One job a search found: its id, its row's state (``cancelled`` rows are kept in the
    done set), its score in the set walked (pending: 0 or its lane's
    order; active: its lease deadline; delayed: when due; done, dead: when it ended, in
    server ms), attempts, lane and the first line of its last error."""

    id: str
    state: str
    score: float
    attempts: int
    lane: str | None
    error: str


@dataclass(frozen=True, slots=True)
class Window:
    """What the ``search`` script returned: entries examined, the last one's score and id
    (the next cursor), and the candidates (id, score) inside the id range."""

    examined: int
    last_score: str
    last_id: str
    candidates: list[tuple[str, str]]


def encode_cursor(state: str, score: str, job_id: str) -> str:
    return f"{state}/{score}/{job_id}"


def decode_cursor(cursor: str | None, states: Sequence[str]) -> tuple[int, str, str]:
    """(index into ``states``, score, id) of a cursor; the start for None or ''."""
    if not cursor:
        return 0, "", ""
    if not isinstance(cursor, str):
        raise InvalidArgument(f"a search cursor is a str, not {type(cursor).__name__}")
    parts = cursor.split("/")
    if len(parts) != 3 or parts[0] not in states:
        raise InvalidArgument(f"not a cursor of this search: {cursor!r:.80}")
    state, score, job_id = parts
    if bool(score) != bool(job_id):
        raise InvalidArgument(f"not a cursor of this search: {cursor!r:.80}")
    if score:
        try:
            float(score)
        except ValueError:
            raise InvalidArgument(f"not a cursor of this search: {cursor!r:.80}") from None
    return list(states).index(state), score, job_id


_SEARCH = layout("search", ("set", "meta"), ("after_score", "after_id", "count", "low", "high"))
_SEARCH_ROWS = layout("search_rows", ("set", "meta", "jobs"), ("lane", "error_type", "text", "ids"))


def search(k: QueueKeys, state: str, *, after_score: str, after_id: str, count: int,
           low: str, high: str) -> Call:
    check_int("budget", count, 1, MAX_BUDGET)
    return Call(_SEARCH, [k.state(state), k.meta], [after_score, after_id, count, low, high])


def search_rows(k: QueueKeys, state: str, query: SearchQuery, ids: Sequence[str]) -> Call:
    return Call(_SEARCH_ROWS, [k.state(state), k.meta, *(k.job_prefix + i for i in ids)],
                [query.lane or "", query.error_type, query.text, *ids])


def decode_window(reply: Any) -> Window:
    examined, last_score, last_id, *flat = reply
    return Window(int(examined), text(last_score), text(last_id),
                  [(text(flat[i]), text(flat[i + 1])) for i in range(0, len(flat), 2)])


def decode_hits(state: str, reply: Any, scores: dict[str, str]) -> list[SearchHit]:
    """The hits of a ``search_rows`` reply; ``scores`` the window's (id -> score)."""
    out = []
    for i in range(0, len(reply), 5):
        job_id, row_state, attempts, lane, error = (text(x) for x in reply[i : i + 5])
        out.append(SearchHit(job_id, row_state or state, float(scores[job_id]), int(attempts or 0),
                             lane or None, error))
    return out
