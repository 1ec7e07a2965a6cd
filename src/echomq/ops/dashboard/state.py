"""What the dashboard's handlers share: its options, the plug-in page type, the per-app
:class:`State` and :func:`state`, which finds it from a request.

Every other module of the dashboard imports this one and none imports back: the pages
(:mod:`~echomq.ops.dashboard.views`), the actions (:mod:`~echomq.ops.dashboard.actions`) and
``/metrics`` (:mod:`~echomq.ops.dashboard.metrics`) read the state; the application
(:mod:`~echomq.ops.dashboard.app`) builds it and routes to them.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from aiohttp import web

from echomq.client._async.cluster import AsyncClusterConnector
from echomq.client._async.connector import AsyncConnector
from echomq.core.errors import InvalidArgument
from echomq.ops.dashboard import data
from echomq.ops.dashboard.history import History
from echomq.ops.dashboard.render import layout
from echomq.ops.metrics import QueueMetrics

__all__ = ["COOKIE", "STATE", "DashboardOptions", "Page", "State", "state"]

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
