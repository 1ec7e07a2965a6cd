# Generated from echomq/client/_async/search.py by scripts/unasync_gen.py. Do not edit.
"""Search over one queue's jobs, window by window (:mod:`echomq.protocol.search`).

:func:`search_window` is one bounded step: a ``search`` call over one state's set after the
cursor (O(log n + budget)), then ``search_rows`` calls of at most
:data:`~echomq.protocol.search.ROWS_PER_CALL` candidates each, sent in one flush: every call
bounded whatever the queue's size. :func:`search` repeats windows until it has ``limit``
hits, the states are walked, or ``max_windows`` windows ran, and hands back the cursor to
go on from (docs/decisions/0037-search.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from echomq.client._sync.seam import ScriptConnector
from echomq.core.bounds import check_int
from echomq.core.errors import InvalidArgument
from echomq.protocol import search as s
from echomq.protocol.keyspace import QueueKeys

__all__ = ["SearchPage", "search", "search_window"]


@dataclass(frozen=True, slots=True)
class SearchPage:
    """Hits in walk order; ``cursor`` to go on from (None: the walk is complete);
    ``examined`` entries and ``windows`` windows it took."""

    hits: list[s.SearchHit]
    cursor: str | None
    examined: int
    windows: int


def search_window(connector: ScriptConnector, k: QueueKeys, query: s.SearchQuery,
                        cursor: str | None, budget: int, limit: int = s.MAX_BUDGET,
                        ) -> tuple[list[s.SearchHit], str | None, int]:
    """One window: (hits, the next cursor or None at the end, entries examined). At most
    ``limit`` hits: the cursor then stands at the last hit returned."""
    if not isinstance(query, s.SearchQuery):
        raise InvalidArgument(f"query must be a SearchQuery, not {type(query).__name__}")
    check_int("budget", budget, 1, s.MAX_BUDGET)
    states = query.states
    at, score, job_id = s.decode_cursor(cursor, states)
    low, high = query.id_range()
    if low and high and low > high:
        return [], None, 0
    state = states[at]
    window = s.decode_window(connector.run(
        s.search(k, state, after_score=score, after_id=job_id, count=budget, low=low, high=high)))
    hits: list[s.SearchHit] = []
    scores = dict(window.candidates)
    if window.candidates:
        ids = list(scores)
        calls = [s.search_rows(k, state, query, ids[i : i + s.ROWS_PER_CALL])
                 for i in range(0, len(ids), s.ROWS_PER_CALL)]
        for reply in connector.pipeline(calls):  # one flush, each call bounded
            if isinstance(reply, BaseException):
                raise reply
            hits += s.decode_hits(state, reply, scores)
    if len(hits) > limit:
        hits = hits[:limit]
        return hits, s.encode_cursor(state, scores[hits[-1].id], hits[-1].id), window.examined
    if window.examined < budget:  # the set is walked: the next state, from its start
        nxt = s.encode_cursor(states[at + 1], "", "") if at + 1 < len(states) else None
    else:
        nxt = s.encode_cursor(state, window.last_score, window.last_id)
    return hits, nxt, window.examined


def search(connector: ScriptConnector, k: QueueKeys, query: s.SearchQuery, *,
                 cursor: str | None = None, limit: int = 50, budget: int = 200,
                 max_windows: int = 50) -> SearchPage:
    """Windows of ``budget`` entries (1..500) until ``limit`` (1..10,000) hits, the end,
    or ``max_windows`` (1..100,000) windows; the page and the cursor to go on from."""
    check_int("limit", limit, 1, 10_000)
    check_int("max_windows", max_windows, 1, 100_000)
    hits: list[s.SearchHit] = []
    examined = windows = 0
    while windows < max_windows:
        got, cursor, n = search_window(connector, k, query, cursor, budget,
                                             limit=limit - len(hits))
        hits += got
        examined += n
        windows += 1
        if cursor is None or len(hits) >= limit:
            break
    return SearchPage(hits, cursor, examined, windows)
