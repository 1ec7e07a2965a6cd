"""The dashboard's pages: the queues overview, one queue, one job, and plug-in pages."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import quote, urlencode

from aiohttp import web

from echomq.client._async.memory import memory_status as memory_status_async
from echomq.client._async.upkeep import STATES
from echomq.core import ids as branded
from echomq.core.errors import (
    BackPressure,
    ConfigurationError,
    InvalidQueueName,
    QueueNotFound,
    ScriptContractError,
    ServerError,
)
from echomq.core.memory import human
from echomq.ops.dashboard import data
from echomq.ops.dashboard.charts import Series, line_chart
from echomq.ops.dashboard.flow_view import flow_section, flow_tree
from echomq.ops.dashboard.history import Sample
from echomq.ops.dashboard.render import ago, badge, duration, esc, payload_preview, table, utc
from echomq.ops.dashboard.state import State, state
from echomq.protocol.keyspace import check_queue

__all__ = ["job_page", "overview", "plugin_page", "queue_page"]

WHEN = {"pending": "admitted", "active": "lease deadline", "delayed": "due", "done": "finished",
        "dead": "died", "expired": "expired"}
_MOVE = {"dead": ("retry", "delete"), "pending": ("delete",), "delayed": ("delete",),
         "expired": ("delete",)}


def _qurl(name: str, **params: object) -> str:
    tail = urlencode({k: v for k, v in params.items() if v not in (None, "")})
    return f"/queues/{quote(name, safe='')}" + (f"?{tail}" if tail else "")


def _charts(st: State, names: Sequence[str], *, per_queue: bool) -> str:
    """Throughput, latency and depth charts from the sampled history."""
    h = st.history
    if h is None:
        return ""
    rings = {n: h.samples(n) for n in names}
    if per_queue:
        (name,) = names
        ring = rings[name]
        series = [
            ("throughput (jobs/s)", "", [Series("completed/s", [s.completed_per_s for s in ring]),
                                         Series("died/s", [s.died / s.window_s for s in ring])]),
            ("latency, admission to done", "ms", [Series("p50", [s.p50_ms for s in ring]),
                                                  Series("p95", [s.p95_ms for s in ring])]),
            ("depth", "", [Series("pending", [s.pending for s in ring]),
                           Series("active", [s.active for s in ring]),
                           Series("dead", [s.dead for s in ring])]),
        ]
    else:
        busiest = sorted(names, key=lambda n: -sum(s.completed for s in rings[n]))[:4]

        def by_queue(pick: str) -> list[Series]:
            return [Series(n, [_pick(s, pick) for s in rings[n]]) for n in busiest]

        series = [("throughput (completed/s)", "", by_queue("rate")),
                  ("latency p95, admission to done", "ms", by_queue("p95")),
                  ("pending", "", by_queue("pending"))]
    charts = (line_chart(title, ss, unit=unit, span_s=h.span_s, slots=h.length)
              for title, unit, ss in series)
    return '<div class="charts">' + "".join(charts) + "</div>"


def _pick(s: Sample, what: str) -> float | None:
    return {"rate": s.completed_per_s, "p95": s.p95_ms, "pending": float(s.pending)}[what]


async def _memory(st: State) -> tuple[str, str]:
    """A card with used memory against maxmemory and the policy, and a warning while the
    server refuses admissions (or could evict jobs): (card, warning)."""
    try:
        m = await memory_status_async(st.connector)
    except Exception:  # the figures are a courtesy: the page shows without them
        return "", ""
    limit = f" of {human(m.maxmemory)}" if m.limited else ", no maxmemory"
    card = (f'<div class="card stat memory"><b>{esc(human(m.counted))}</b>'
            f'<span>memory{esc(limit)} ({esc(m.policy)})</span></div>')
    warn = (f'<p class="flash err memory" role="alert">{esc(m.describe())}</p>'
            if m.refusing or m.evicting else "")
    return card, warn


async def overview(request: web.Request) -> web.Response:
    st = state(request)
    names = await st.queues()
    sums, broken = [], []
    for n in names:
        try:
            sums.append(await data.summary(st.connector, n))
        except QueueNotFound:
            continue  # deleted since the scan
        except (ServerError, ScriptContractError, ConfigurationError) as exc:
            if isinstance(exc, BackPressure):
                raise  # a busy or full server: every queue is unavailable, the page says so
            broken.append((n, exc))  # one damaged queue is one flagged row, not a 503 page
    totals = {s: sum(getattr(q.counts, s) for q in sums) for s in STATES}
    workers = [(q.name, w, q.now_ms) for q in sums for w in q.workers]
    cards = "".join(f'<a class="card stat {s}" href="#queues"><b>{totals[s]:,}</b><span>{s}</span></a>'
                    for s in STATES)
    cards += (f'<div class="card stat"><b>{len(names)}</b><span>queues</span></div>'
              f'<div class="card stat"><b>{len({w.name for _, w, _ in workers})}</b>'
              '<span>workers</span></div>')
    memory, warning = await _memory(st)
    cards += memory
    rows = []
    for q in sums:
        ring = st.history.samples(q.name) if st.history else []
        last = ring[-1] if ring else None
        oldest = _oldest(q.oldest_pending_age_s, q.now_ms)
        counts = [f'<a href="{esc(_qurl(q.name, state=s))}">{getattr(q.counts, s):,}</a>'
                  for s in STATES]
        rows.append([f'<a href="{esc(_qurl(q.name))}">{esc(q.name)}</a>', *counts, oldest,
                     f"{q.completed_last_minute:,} / {q.dead_last_minute:,}",
                     f"{last.completed_per_s:,.1f}/s" if last else "–",
                     duration(last.p95_ms / 1000) if last and last.p95_ms is not None else "–",
                     str(len(q.workers))])
    for n, why in broken:
        rows.append([f'<a href="{esc(_qurl(n))}">{esc(n)}</a>',
                     f'<span class="flash err" role="alert">unreadable: {esc(type(why).__name__)}: '
                     f'{esc(why)}</span>', *[""] * (len(STATES) + 4)])
    queues = table(["queue", *STATES, "oldest pending", "done / dead last min", "throughput",
                    "p95 latency", "workers"], rows,
                   cls="queues num", empty="no queue on this server yet")
    wrows = [[esc(w.name), f'<a href="{esc(_qurl(qn))}">{esc(qn)}</a>',
              esc(w.about.get("concurrency", "")), esc(w.about.get("running", "")),
              f"{w.processed_last_minute:,} / {w.failed_last_minute:,}", ago(w.deadline_ms, now)]
             for qn, w, now in workers]
    body = (f'<h1>Queues</h1>{warning}<div class="cards">{cards}</div>{_charts(st, names, per_queue=False)}'
            f'<h2 id="queues">Queues</h2>{queues}'
            '<h2>Workers</h2>' + table(["worker", "queue", "concurrency", "running",
                                         "processed / failed last min", "registration lapses"], wrows,
                                        cls="workers", empty="no worker registered"))
    return st.html(request, "Queues", body, active="/", refresh_s=st.options.refresh_s)


def _oldest(age_s: float | None, now_ms: int) -> str:
    return ago(now_ms - age_s * 1000, now_ms) if age_s is not None else "–"


def _queue_name(request: web.Request) -> str:
    try:
        return check_queue(request.match_info["queue"])
    except InvalidQueueName as exc:
        raise web.HTTPBadRequest(text=str(exc)) from None


def _int(value: str | None, default: int) -> int:
    try:
        return max(0, int(value)) if value else default
    except ValueError:
        raise web.HTTPBadRequest(text=f"not a number: {value!r}") from None


def _flash(request: web.Request) -> str:
    msg = request.query.get("msg")
    return f'<p class="flash ok" role="status">{esc(msg)}</p>' if msg else ""


async def queue_page(request: web.Request) -> web.Response:
    st = state(request)
    name = _queue_name(request)
    found = request.query.get("id", "").strip()
    if found:
        if branded.valid(found) and await data.job_detail(st.connector, name, found):
            raise web.HTTPSeeOther(f"{_qurl(name)}/jobs/{found}")
        miss = f'<p class="flash err" role="alert">No job {esc(found)} in queue {esc(name)}.</p>'
    else:
        miss = ""
    try:
        s = await data.summary(st.connector, name)
    except QueueNotFound:
        raise web.HTTPNotFound(text=f"queue {name!r} does not exist on this server") from None
    where = request.query.get("state", "pending")
    if where not in STATES:
        raise web.HTTPBadRequest(text=f"state must be one of {', '.join(STATES)}")
    size = st.options.page_size
    page = _int(request.query.get("page"), 1) or 1
    total = getattr(s.counts, where)
    pages = max(1, -(-total // size))
    views = await data.page(st.connector, name, where, (page - 1) * size, size)
    tabs = "".join(f'<a class="tab{" on" if x == where else ""}" href="{esc(_qurl(name, state=x))}">'
                   f'{badge(x)} {getattr(s.counts, x):,}</a>' for x in STATES)
    search = (f'<form class="search" method="get" action="{esc(_qurl(name))}">'
              '<input name="id" placeholder="find a job by id (JOB…)" size="34" '
              f'value="{esc(found)}"><button>Find</button> <a href="{esc(_qurl(name))}/search">'
              "search by state, lane, error, time…</a></form>")
    moves = _MOVE.get(where, ()) if st.may_act() and st.signed_in(request) else ()
    rows = []
    for v in views:
        row = v.row
        when = ago(v.score, s.now_ms) if where != "pending" else (
            ago(branded.timestamp_ms(v.id), s.now_ms) if branded.valid(v.id) else "")
        err = row.get("error", b"").decode(errors="replace").partition("\n")[0]
        pay = row.get("payload", b"")[:60].decode(errors="replace")
        pick = (f'<input type="checkbox" name="id" value="{esc(v.id)}" aria-label="select {esc(v.id)}">'
                if moves else "")
        rows.append([*([pick] if moves else []),
                     f'<a class="mono" href="{esc(_qurl(name))}/jobs/{esc(v.id)}">{esc(v.id)}</a>',
                     when, str(v.attempts), esc(row.get("lane", b"").decode(errors="replace")),
                     f'<span class="err" title="{esc(err)}">{esc(err[:80])}</span>',
                     f'<span class="mono dim">{esc(pay)}</span>'])
    pick_all = ["<input type=checkbox class=all aria-label='select all'>"] if moves else []
    jobs = table([*pick_all, "id", WHEN[where], "attempts", "lane", "last error", "payload"], rows,
                 cls="jobs", empty=f"no {where} jobs")
    buttons = "".join(
        f'<button name="action" value="{a}" class="act {a}" data-confirm="{a} {{n}} {where} job(s) '
        f'of {esc(name)}?">{a.capitalize()} selected</button>' for a in moves)
    back = esc(_qurl(name, state=where, page=page if page > 1 else None))
    form = (f'<form method="post" action="{esc(_qurl(name))}/actions" class="jobs-form">'
            f'<input type="hidden" name="state" value="{where}"><input type="hidden" name="back" '
            f'value="{back}">{jobs}<div class="bar">{buttons}{_pager(name, where, page, pages)}</div>'
            "</form>")
    lane_list, waiting, complete = await data.lanes(st.connector, name)
    lrows = [[esc(lane.name), f"{lane.backlog:,}", (f'<a class="mono" href="{esc(_qurl(name))}/jobs/'
              f'{esc(lane.holder)}">{esc(lane.holder)}</a>' if lane.holder else "")]
             for lane in lane_list[:50]]
    note = "" if complete else " (counted over the first 2,000 pending jobs)"
    lanes = (f'<h2>Lanes</h2><p class="dim">{waiting:,} lane(s) with a waiting job{note}.</p>'
             + table(["lane", "backlog", "serial lane held by"], lrows, cls="lanes",
                     empty="no lane has a job waiting"))
    oldest = (f"oldest pending admitted {_oldest(s.oldest_pending_age_s, s.now_ms)}"
              if s.oldest_pending_age_s is not None else "nothing pending")
    oldest += f" · {s.completed_last_minute:,} done, {s.dead_last_minute:,} dead in the last minute"
    if s.overdue_leases:
        oldest += f' · <span class="err">{s.overdue_leases:,} lease(s) past their deadline</span>'
    body = (f'<h1>Queue <span class="mono">{esc(name)}</span></h1>{_flash(request)}{miss}'
            f'<p class="dim">{oldest} · {len(s.workers)} worker(s)</p>'
            f"{await _gate_bar(request, name)}"
            f"{_charts(st, [name], per_queue=True)}"
            f'<div class="tabs">{tabs}</div>{search}{form}{lanes}')
    return st.html(request, f"Queue {name}", body)


async def _gate_bar(request: web.Request, name: str) -> str:
    """The claim gate: paused or running, the rate limits, and Pause/Resume for a
    signed-in operator (docs/decisions/0022-claim-gate.md)."""
    st = state(request)
    g = await data.gate(st.connector, name)
    if g is None:
        return ""
    limits = " · ".join(f"{label} {x.max} per {x.per_ms:,} ms" for label, x in
                        (("rate", g.rate), ("per lane", g.lane_rate)) if x) or "no rate limit"
    text = (f'{badge("paused") if g.paused else badge("running")} claims '
            f'{"stopped (admissions go on)" if g.paused else "go on"} · {esc(limits)}')
    if not (st.may_act() and st.signed_in(request)):
        return f'<p class="gate">{text}</p>'
    act = "resume" if g.paused else "pause"
    return (f'<form method="post" action="{esc(_qurl(name))}/actions" class="gate bar">{text} '
            f'<input type="hidden" name="state" value="queue"><button name="action" value="{act}" '
            f'class="act {act}" data-confirm="{act} claims on {esc(name)}?">{act.capitalize()}</button>'
            "</form>")


def _pager(name: str, where: str, page: int, pages: int) -> str:
    prev = (f'<a href="{esc(_qurl(name, state=where, page=page - 1))}" rel="prev">← previous</a>'
            if page > 1 else "")
    nxt = (f'<a href="{esc(_qurl(name, state=where, page=page + 1))}" rel="next">next →</a>'
           if page < pages else "")
    return f'<span class="pager">{prev} page {page} of {pages} {nxt}</span>'


async def job_page(request: web.Request) -> web.Response:
    st = state(request)
    name = _queue_name(request)
    job_id = request.match_info["job"]
    if not branded.valid(job_id):
        raise web.HTTPBadRequest(text=f"not a job id: {job_id!r}")
    d = await data.job_detail(st.connector, name, job_id)
    if d is None:
        body = (f'<h1>Job <span class="mono">{esc(job_id)}</span></h1><p class="flash err">No such job in '
                f'queue {esc(name)} (finished rows are kept for their retention window only).</p>')
        return st.html(request, "Job not found", body, status=404)
    created = branded.timestamp_ms(job_id)
    facts = [("queue", f'<a href="{esc(_qurl(name))}">{esc(name)}</a>'), ("state", badge(d.state)),
             ("admitted", ago(created, d.now_ms)), ("attempts", esc(d.field("attempts") or "0")),
             ("failures", esc(d.field("failures") or "0")),
             ("failure limit", esc(d.field("max") or "queue default"))]
    if d.field("lane"):
        facts.append(("lane", esc(d.field("lane")) + (" (serial)" if d.field("serial") == "1" else "")))
    if d.field("exp"):  # admitted with a deadline to start by (decision 0045)
        facts.append(("start deadline", ago(int(d.field("exp")), d.now_ms)))
    if d.score is not None and d.state in ("active", "delayed", "done", "dead", "cancelled",
                                           "expired"):
        label = {"active": "lease deadline", "delayed": "due", "cancelled": "cancelled"}.get(
            d.state) or WHEN[d.state]
        facts.append((label, ago(d.score, d.now_ms)))
    if d.field("cancel"):  # asked to stop while it ran (decision 0023)
        facts.append(("cancel asked", ago(int(d.field("cancel")), d.now_ms)))
    if d.row.get("progress") is not None:
        when = f' ({ago(int(d.field("progress_at")), d.now_ms)})' if d.field("progress_at") else ""
        facts.append(("progress", f'<span class="mono">{esc(d.field("progress")[:200])}</span>{when}'))
    dl = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts)
    kind, preview = payload_preview(d.row.get("payload", b""))
    parts = [f'<h1>Job <span class="mono">{esc(job_id)}</span></h1>{_flash(request)}',
             f'<div class="detail"><dl class="card facts">{dl}</dl>{_history(d, created)}</div>',
             f'<h2>Payload <small>{esc(kind)}, {len(d.row.get("payload", b"")):,} bytes</small></h2>'
             f"{preview}"]
    if d.field("error"):
        # The row keeps one text: "Type: message", then the bounded traceback (echomq.core.failures).
        head, _, trace = d.field("error").partition("\n")
        parts.append(f'<h2>Last error</h2><p class="err">{esc(head)}</p>')
        if trace:
            parts.append(f'<pre class="traceback">{esc(trace)}</pre>')
    tree = await flow_tree(st.connector, name, job_id, d.row)
    if tree is not None:
        parts.append(flow_section(tree, job_id))
    if d.row.get("result"):
        rkind, rprev = payload_preview(d.row["result"])
        parts.append(f"<h2>Result <small>{esc(rkind)}</small></h2>{rprev}")
    shown = {"payload", "result", "error", "state", "attempts", "failures",
             "max", "lane", "serial", "cancel", "progress", "progress_at",
             "tok", "fin"}  # call tokens (docs/protocol.md): nothing an operator reads
    extra = [[esc(k), f'<span class="mono">{esc(v[:200])}</span>'] for k, v in sorted(d.row.items())
             if k not in shown and not k.startswith("c:")]  # a flow's children: the tree
    if extra:
        parts.append("<h2>Other fields</h2>" + table(["field", "value"], extra))
    moves = _MOVE.get(d.state, ()) if st.may_act() and st.signed_in(request) else ()
    if moves:
        back = esc(_qurl(name, state=d.state))
        buttons = "".join(f'<button name="action" value="{a}" class="act {a}" data-confirm="{a} this '
                          f'{d.state} job?">{a.capitalize()}</button>' for a in moves)
        parts.append(f'<form method="post" action="{esc(_qurl(name))}/actions" class="bar">'
                     f'<input type="hidden" name="state" value="{esc(d.state)}">'
                     f'<input type="hidden" name="id" value="{esc(job_id)}">'
                     f'<input type="hidden" name="back" value="{back}">{buttons}</form>')
    return st.html(request, f"Job {job_id}", "".join(parts))


def _history(d: data.JobDetail, created: int) -> str:
    """What the row and the sets tell of the job's life, oldest first (the protocol keeps
    the current state's time, not a log of every transition)."""
    events: list[tuple[int | None, str]] = [(created, "admitted (the time its id carries)")]
    attempts, failures = int(d.field("attempts") or 0), int(d.field("failures") or 0)
    if attempts:
        events.append((None, f"claimed {attempts} time(s), {failures} failure(s) counted"))
    if d.field("error"):
        events.append((None, f"last failure: {d.field('error').partition(chr(10))[0][:120]}"))
    if d.score is not None:
        what = {"active": "lease deadline", "delayed": "due", "done": "finished",
                "dead": "died (moved to the dead set)", "pending": "",
                "expired": "expired: not started by its deadline"}.get(d.state, "")
        if what:
            events.append((int(d.score), what))
    items = "".join(f"<li>{'<b>' + esc(utc(t)) + '</b> ' if t is not None else ''}{esc(text)}</li>"
                    for t, text in events)
    return f'<div class="card history"><h3>History</h3><ol>{items}</ol></div>'


async def plugin_page(request: web.Request) -> web.Response:
    st = state(request)
    slug = request.match_info["slug"]
    page = next((p for p in st.pages if p.slug == slug), None)
    if page is None:
        raise web.HTTPNotFound(text=f"no page {slug!r}")
    return st.html(request, page.title, await page.render(), active=f"/x/{slug}",
                   refresh_s=st.options.refresh_s)
