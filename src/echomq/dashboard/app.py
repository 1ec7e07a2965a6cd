"""The dashboard's aiohttp application: options, the page plug-in hook, sign-in, wiring.

:func:`create_app` builds the app over a server URL; it connects on start-up, samples
the queues in the background (:class:`~echomq.dashboard.history.History`) and closes
everything on clean-up. Pages live in :mod:`~echomq.dashboard.views`, the actions in
:mod:`~echomq.dashboard.actions`.

Actions need the token: a person signs in once with it (it is kept in an HttpOnly,
SameSite=Strict cookie, so another site cannot post with it), a script sends
``Authorization: Bearer <token>``. With no token configured, or with
``read_only=True``, every action is refused.
"""

from __future__ import annotations

import asyncio
import hmac
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from aiohttp import web
from aiohttp.typedefs import Handler
from redis.exceptions import RedisError

from echomq._async.cluster import AsyncClusterConnector
from echomq._async.connect import connect_async
from echomq._async.connector import AsyncConnector
from echomq.dashboard import data
from echomq.dashboard.history import History
from echomq.dashboard.render import esc, layout
from echomq.errors import EchoMQError, InvalidArgument
from echomq.metrics import QueueMetrics

__all__ = ["COOKIE", "DashboardOptions", "Page", "State", "create_app", "serve"]

COOKIE = "echomq_token"


@dataclass(frozen=True, slots=True, kw_only=True)
class DashboardOptions:
    """How the dashboard behaves.

    * ``token``: the secret that allows actions; None allows none.
    * ``read_only``: refuse every action even with the token.
    * ``page_size``: jobs per page (25; at most 100 can be acted on at once).
    * ``sample_s`` / ``history``: a sample every 5 s, 120 kept: charts of the last 10 min.
    * ``refresh_s``: the overview reloads itself this often (0: never).
    """

    token: str | None = None
    read_only: bool = False
    page_size: int = 25
    sample_s: float = 5.0
    history: int = 120
    refresh_s: int = 10

    def __post_init__(self) -> None:
        if self.token is not None and len(self.token) < 8:
            raise InvalidArgument("the dashboard token must be at least 8 characters")
        if not 1 <= self.page_size <= 100:
            raise InvalidArgument("page_size must be 1..100")


@dataclass(frozen=True, slots=True)
class Page:
    """A page another package adds (the plug-in hook): shown at ``/x/<slug>`` and in the
    navigation. ``render`` returns the page's body as HTML (it escapes what it shows);
    ``startup``/``cleanup`` run with the app's (to open and close its own connections)."""

    slug: str
    title: str
    render: Callable[[], Awaitable[str]]
    startup: Callable[[], Awaitable[None]] | None = None
    cleanup: Callable[[], Awaitable[None]] | None = None


@dataclass(slots=True)
class State:
    """What the handlers share (one per app)."""

    url: str
    options: DashboardOptions
    pages: Sequence[Page]
    conn: AsyncConnector | AsyncClusterConnector | None = None
    history: History | None = None
    metrics: QueueMetrics | None = None
    _queues: list[str] = field(default_factory=list)
    _queues_at: float = -1e9

    @property
    def connector(self) -> AsyncConnector | AsyncClusterConnector:
        assert self.conn is not None, "the app has not started"
        return self.conn

    async def queues(self) -> list[str]:
        """The queues on the server, re-scanned at most every 5 s (SCAN walks every key)."""
        if time.monotonic() - self._queues_at > 5.0:
            self._queues = await data.discover(self.connector)
            self._queues_at = time.monotonic()
        return self._queues

    def forget_queues(self) -> None:
        self._queues_at = -1e9

    # ------------------------------------------------------------------ auth
    def may_act(self) -> bool:
        return self.options.token is not None and not self.options.read_only

    def signed_in(self, request: web.Request) -> bool:
        token = self.options.token
        if token is None:
            return False
        offered = request.cookies.get(COOKIE, "")
        header = request.headers.get("Authorization", "")
        if header.startswith("Bearer "):
            offered = header[7:]
        return hmac.compare_digest(offered.encode(), token.encode())

    def nav(self) -> list[tuple[str, str]]:
        return [("Queues", "/"), *((p.title, f"/x/{p.slug}") for p in self.pages)]

    def html(self, request: web.Request, title: str, body: str, *, active: str = "",
             status: int = 200, refresh_s: int = 0) -> web.Response:
        text = layout(title, body, nav=self.nav(), active=active, read_only=not self.may_act(),
                      signed_in=self.signed_in(request), refresh_s=refresh_s)
        return web.Response(text=text, content_type="text/html", status=status,
                            headers={"Cache-Control": "no-store", "X-Frame-Options": "DENY",
                                     "Content-Security-Policy": _CSP})


# Everything the pages use is served by the app itself; inline styles are for SVG only.
_CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        "frame-ancestors 'none'; form-action 'self'")

STATE: web.AppKey[State] = web.AppKey("echomq_dashboard", State)


def state(request: web.Request) -> State:
    return request.app[STATE]


def _static_dir() -> Path:
    return Path(str(resources.files("echomq.dashboard") / "static"))


async def login_page(request: web.Request) -> web.Response:
    st = state(request)
    if not st.may_act():
        why = ("this dashboard runs read-only" if st.options.read_only
               else "no token is configured (start it with --token or ECHOMQ_DASHBOARD_TOKEN)")
        return st.html(request, "Sign in", f'<h1>Sign in</h1><p class="flash warn">Actions are off: '
                                           f'{esc(why)}.</p>')
    body = ('<h1>Sign in for actions</h1><form method="post" action="/login" class="card login">'
            '<label>Token <input type="password" name="token" autocomplete="current-password" '
            'autofocus required></label> <button>Sign in</button></form>')
    return st.html(request, "Sign in", body)


async def login(request: web.Request) -> web.Response:
    st = state(request)
    form = await request.post()
    offered = str(form.get("token", ""))
    token = st.options.token
    if not st.may_act() or token is None or not hmac.compare_digest(offered.encode(), token.encode()):
        return st.html(request, "Sign in", '<h1>Sign in</h1><p class="flash err">Wrong token, or '
                       'actions are off.</p><p><a href="/login">Try again</a></p>', status=401)
    resp = web.HTTPSeeOther("/")
    resp.set_cookie(COOKIE, offered, httponly=True, samesite="Strict", path="/")
    raise resp


async def logout(request: web.Request) -> web.Response:
    resp = web.HTTPSeeOther("/")
    resp.del_cookie(COOKIE, path="/")
    raise resp


@web.middleware
async def _unavailable(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A server that cannot be reached (or refuses) is a 503 page with one line, a bad
    argument a 400 page, never a traceback."""
    try:
        return await handler(request)
    except ValueError as exc:  # an argument out of range (a page past the last, a bad id)
        return state(request).html(request, "Bad request", f'<h1>Bad request</h1><p class="flash err">'
                                   f"{esc(exc)}</p>", status=400)
    except (EchoMQError, RedisError) as exc:
        st = state(request)
        body = (f'<h1>Server unavailable</h1><p class="flash err" role="alert">{esc(type(exc).__name__)}: '
                f"{esc(exc)}</p><p>The page will work again once the server answers.</p>")
        return st.html(request, "Server unavailable", body, status=503)


def create_app(url: str, *, options: DashboardOptions | None = None, pages: Sequence[Page] = (),
               connector: AsyncConnector | AsyncClusterConnector | None = None) -> web.Application:
    """The dashboard over the server (or cluster) at ``url``; ``pages`` are plug-in pages.

    A ``connector`` given is used as is (and not closed); otherwise one is opened on
    start-up and closed on clean-up.
    """
    from echomq.dashboard import actions, metrics, views

    opts = options or DashboardOptions()
    slugs = [p.slug for p in pages]
    if len(set(slugs)) != len(slugs) or not all(s.isidentifier() for s in slugs):
        raise InvalidArgument("plug-in page slugs must be distinct identifiers")
    app = web.Application(client_max_size=256 * 1024, middlewares=[_unavailable])
    st = State(url=url, options=opts, pages=tuple(pages), conn=connector)
    app[STATE] = st

    async def start(app: web.Application) -> None:
        if st.conn is None:
            # A short retry budget: a page says "server unavailable" in 3 s instead of hanging.
            st.conn = connect_async(url, retry_budget_s=3.0)
        await st.connector.server_time_ms()  # an unreachable server fails the start, not a page
        st.history = History(st.connector, interval_s=opts.sample_s, length=opts.history)
        st.metrics = metrics.queue_metrics(st.history)
        task = asyncio.create_task(st.history.run(st.queues))
        app[_SAMPLER] = task
        for p in st.pages:
            if p.startup is not None:
                await p.startup()

    async def stop(app: web.Application) -> None:
        task = app[_SAMPLER]
        if st.history is not None:
            st.history.stop()
        task.cancel()
        await asyncio.wait({task}, timeout=5.0)  # it ends after the queue it is sampling
        for p in st.pages:
            if p.cleanup is not None:
                await p.cleanup()
        if connector is None and st.conn is not None:
            await st.conn.aclose()

    app.on_startup.append(start)
    app.on_cleanup.append(stop)
    app.router.add_get("/", views.overview)
    app.router.add_get("/queues/{queue}", views.queue_page)
    app.router.add_get("/queues/{queue}/jobs/{job}", views.job_page)
    app.router.add_post("/queues/{queue}/actions", actions.act)
    app.router.add_get("/x/{slug}", views.plugin_page)
    app.router.add_get("/login", login_page)
    app.router.add_post("/login", login)
    app.router.add_post("/logout", logout)
    app.router.add_get("/metrics", metrics.endpoint)
    app.router.add_static("/static", _static_dir(), append_version=False)
    return app


_SAMPLER: web.AppKey[asyncio.Task[None]] = web.AppKey("echomq_dashboard_sampler")


def serve(url: str, *, host: str = "127.0.0.1", port: int = 8700, options: DashboardOptions | None = None,
          pages: Sequence[Page] = (), announce: Callable[[str], None] = print) -> None:
    """Run the dashboard until interrupted (Ctrl-C or SIGTERM stop it cleanly)."""
    app = create_app(url, options=options, pages=pages)

    async def say(app: web.Application) -> None:
        announce(f"EchoMQ dashboard on http://{host}:{port}/ for {url}"
                 + (" (read-only)" if not app[STATE].may_act() else ""))

    app.on_startup.append(say)
    # Pages answer in milliseconds: 2 s is plenty for in-flight requests at Ctrl-C.
    web.run_app(app, host=host, port=port, print=None, handle_signals=True, shutdown_timeout=2.0)
