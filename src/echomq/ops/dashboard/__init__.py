"""The EchoMQ web dashboard (the ``dashboard`` extra): ``echomq dashboard --url URL``.

An aiohttp application with every asset in the package (one stylesheet, one small
script, charts drawn as inline SVG on the server). Pages: the queues overview, one
queue's jobs by state, one job; actions on dead and waiting jobs go through the
queue's own Lua transitions and need the token; ``/metrics`` for Prometheus. Another
package adds pages with :class:`Page` (``codemojex dashboard`` adds the game's);
echomq itself never imports one.
"""

from echomq.ops.dashboard.app import create_app, serve
from echomq.ops.dashboard.render import ago, badge, esc, table
from echomq.ops.dashboard.state import DashboardOptions, Page

__all__ = ["DashboardOptions", "Page", "ago", "badge", "create_app", "esc", "serve", "table"]
