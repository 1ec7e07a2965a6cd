"""The dashboard's aiohttp application: sign-in, the error pages, wiring.

:func:`create_app` builds the app over a server URL; it connects on start-up, samples
the queues in the background (:class:`~echomq.ops.dashboard.history.History`) and closes
everything on clean-up. Pages live in :mod:`~echomq.ops.dashboard.views`, the actions in
:mod:`~echomq.ops.dashboard.actions`, ``/metrics`` in :mod:`~echomq.ops.dashboard.metrics`; the
options, the plug-in :class:`~echomq.ops.dashboard.state.Page` and the state they all
share in :mod:`~echomq.ops.dashboard.state` (which imports none of them: no import circle).

Actions need the token: a person signs in once with it (it is kept in an HttpOnly,
SameSite=Strict cookie, so another site cannot post with it), a script sends
``Authorization: Bearer <token>``. With no token configured, or with
``read_only=True``, every action is refused.
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path

from aiohttp import web
from aiohttp.typedefs import Handler
from redis.exceptions import RedisError

from echomq.client._async.cluster import AsyncClusterConnector
from echomq.client._async.connect import connect_async
from echomq.client._async.connector import AsyncConnector
from echomq.core.errors import EchoMQError, InvalidArgument
from echomq.ops.dashboard import actions, metrics, search_view, views
from echomq.ops.dashboard.history import History
from echomq.ops.dashboard.render import esc
from echomq.ops.dashboard.state import COOKIE, STATE, DashboardOptions, Page, State, state

__all__ = ["create_app", "serve"]

def _static_dir() -> Path:
    return Path(str(resources.files("echomq.ops.dashboard") / "static"))


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
    app.router.add_get("/queues/{queue}/search", search_view.search_page)
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
