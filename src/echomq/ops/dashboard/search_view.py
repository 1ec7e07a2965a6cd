"""The dashboard's search page: one queue's jobs by state, lane, error, admission time and id
prefix, a page at a time with a cursor (``/queues/{queue}/search``, decision 0037).

Each page is :meth:`echomq.AsyncQueue.search` with the dashboard's page size as ``limit`` and
a bounded number of windows, so a page never costs the server more than that many bounded
calls, whatever the queue's size; "next" carries the cursor.
"""

from __future__ import annotations

from datetime import UTC, datetime
from urllib.parse import quote, urlencode

from aiohttp import web

from echomq.client._async.queue import AsyncQueue
from echomq.core.errors import InvalidArgument
from echomq.ops.dashboard.render import badge, esc, table
from echomq.ops.dashboard.state import state
from echomq.protocol.keyspace import STATES, check_queue
from echomq.protocol.search import SearchQuery

__all__ = ["FIELDS", "search_page"]

FIELDS = ("lane", "error_type", "text", "since", "until", "id_prefix")
_WINDOWS = 20  # windows of 200 entries a page may walk: 4,000 entries, 40 bounded calls at most


def _ms(value: str) -> int | None:
    if not value:
        return None
    if value.isdigit():
        return int(value)
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise web.HTTPBadRequest(text=f"not a time (ms or ISO 8601): {value!r}") from None
    return int((when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp() * 1000)


def _form(base: str, got: dict[str, str], states: tuple[str, ...]) -> str:
    boxes = "".join(f'<label><input type="checkbox" name="state" value="{s}"'
                    f'{" checked" if s in states else ""}> {s}</label> ' for s in STATES)
    inputs = "".join(f'<input name="{f}" placeholder="{f.replace("_", " ")}" value="{esc(got.get(f, ""))}" '
                     'size="18"> ' for f in FIELDS)
    return (f'<form class="search" method="get" action="{esc(base)}/search">{boxes}<br>{inputs}'
            "<button>Search</button></form>")


async def search_page(request: web.Request) -> web.Response:
    st = state(request)
    try:
        name = check_queue(request.match_info["queue"])
    except InvalidArgument as exc:
        raise web.HTTPBadRequest(text=str(exc)) from None
    base = f"/queues/{quote(name, safe='')}"
    got = {f: request.query.get(f, "").strip() for f in FIELDS}
    states = tuple(s for s in STATES if s in request.query.getall("state", [])) or STATES
    cursor = request.query.get("cursor") or None
    try:
        query = SearchQuery(states=states, lane=got["lane"] or None, error_type=got["error_type"],
                            text=got["text"], since_ms=_ms(got["since"]), until_ms=_ms(got["until"]),
                            id_prefix=got["id_prefix"])
        page = await AsyncQueue(st.connector, name).search(
            query, cursor=cursor, limit=st.options.page_size, max_windows=_WINDOWS)
    except InvalidArgument as exc:
        raise web.HTTPBadRequest(text=str(exc)) from None
    rows = [[f'<a class="mono" href="{esc(base)}/jobs/{esc(h.id)}">{esc(h.id)}</a>', badge(h.state),
             str(h.attempts), esc(h.lane or ""), f'<span class="err">{esc(h.error[:120])}</span>']
            for h in page.hits]
    found = table(["id", "state", "attempts", "lane", "last error"], rows, cls="jobs",
                  empty="no job found in this stretch")
    params = [(f, v) for f, v in got.items() if v] + [("state", s) for s in states]
    more = (f'<a rel="next" href="{esc(base)}/search?{esc(urlencode([*params, ("cursor", page.cursor)]))}">'
            "next →</a>" if page.cursor else "end of the queue")
    body = (f'<h1>Search <a class="mono" href="{esc(base)}">{esc(name)}</a></h1>'
            f"{_form(base, got, states)}"
            f'<p class="dim">{len(page.hits)} found, {page.examined:,} jobs examined.</p>'
            f'{found}<div class="bar"><span class="pager">{more}</span></div>')
    return st.html(request, f"Search {name}", body)
