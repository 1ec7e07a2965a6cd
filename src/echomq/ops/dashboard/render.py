"""HTML for the dashboard's pages, built from escaped pieces. Pure: no I/O.

Every value that came from the server (queue names, ids, payloads, errors) passes
through :func:`esc` before it reaches the page, so a payload holding ``<script>`` is
shown as text, never run. Times are shown relative ("3 min ago") with the absolute
UTC time in the element's title.
"""

from __future__ import annotations

import datetime as dt
import html
import json
from collections.abc import Iterable, Sequence

__all__ = ["ago", "badge", "duration", "esc", "layout", "payload_preview", "table", "utc"]

PREVIEW_BYTES = 64 * 1024  # larger payloads are cut: the page stays light, the row is untouched


def esc(value: object) -> str:
    """``value`` as HTML text: bytes are decoded with replacement, everything is escaped."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    return html.escape(str(value), quote=True)


def duration(seconds: float) -> str:
    """A short human duration: ``850 ms``, ``12 s``, ``4 min 3 s``, ``2 h 5 min``, ``3 d 4 h``."""
    s = abs(seconds)
    if s < 1:
        return f"{s * 1000:.0f} ms"
    if s < 60:
        return f"{s:.0f} s" if s >= 10 else f"{s:.1f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60)} s"
    if s < 86400:
        return f"{int(s // 3600)} h {int(s % 3600 // 60)} min"
    return f"{int(s // 86400)} d {int(s % 86400 // 3600)} h"


def utc(ms: float) -> str:
    """Server milliseconds as an ISO UTC time to the second."""
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def ago(ms: float, now_ms: float) -> str:
    """``<time>`` saying how long before (or after) ``now_ms`` the moment ``ms`` is."""
    delta = (now_ms - ms) / 1000
    text = f"{duration(delta)} ago" if delta >= 0 else f"in {duration(delta)}"
    return f'<time datetime="{esc(utc(ms))}" title="{esc(utc(ms))}">{text}</time>'


def badge(state: str) -> str:
    return f'<span class="badge {esc(state)}">{esc(state)}</span>'


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], *, cls: str = "", empty: str = "none"
          ) -> str:
    """A table whose cells are already HTML (escape values before passing them)."""
    head = "".join(f"<th>{h}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    if not body:
        body = f'<tr><td class="empty" colspan="{len(headers)}">{esc(empty)}</td></tr>'
    return f'<table class="{esc(cls)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _hexdump(data: bytes) -> str:
    lines = []
    for off in range(0, len(data), 16):
        chunk = data[off : off + 16]
        hexes = " ".join(f"{b:02x}" for b in chunk)
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{off:08x}  {hexes:<47}  {text}")
    return "\n".join(lines)


def _utf8(data: bytes, *, cut: bool) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if cut and exc.start >= len(data) - 3:  # a character split by the cut is still text
            return data[: exc.start].decode("utf-8", errors="replace")
        return None


def payload_preview(data: bytes) -> tuple[str, str]:
    """(kind, HTML ``<pre>``) for a payload: JSON pretty-printed, UTF-8 text as is, other
    bytes as a hex dump; cut at 64 KiB with a note. Always escaped."""
    cut = data[:PREVIEW_BYTES]
    note = (f'<p class="note">showing the first {PREVIEW_BYTES:,} of {len(data):,} bytes</p>'
            if len(data) > PREVIEW_BYTES else "")
    if not data:
        return "empty", '<pre class="payload">(empty)</pre>'
    text = _utf8(cut, cut=len(data) > PREVIEW_BYTES)
    if text is None:
        return "binary", f'<pre class="payload hex">{esc(_hexdump(cut))}</pre>{note}'
    if len(data) <= PREVIEW_BYTES:
        try:
            doc = json.loads(text)
        except ValueError:
            pass
        else:
            pretty = json.dumps(doc, indent=2, ensure_ascii=False, sort_keys=False)
            return "json", f'<pre class="payload json">{esc(pretty)}</pre>'
    return "text", f'<pre class="payload">{esc(text)}</pre>{note}'


def layout(title: str, body: str, *, nav: Sequence[tuple[str, str]], active: str = "",
           read_only: bool = False, signed_in: bool = False, refresh_s: int = 0) -> str:
    """The page around ``body``: header with the navigation, the sign-in state, styles."""
    links = "".join(
        f'<a href="{esc(href)}"{" class=on" if href == active else ""}>{esc(label)}</a>'
        for label, href in nav)
    if read_only:
        who = '<span class="mode ro" title="actions are refused">read-only</span>'
    elif signed_in:
        who = ('<form method="post" action="/logout" class="inline"><span class="mode rw">actions on'
               '</span> <button class="link">sign out</button></form>')
    else:
        who = '<a class="mode" href="/login">sign in for actions</a>'
    meta = f'<meta http-equiv="refresh" content="{refresh_s}">' if refresh_s else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">{meta}
<title>{esc(title)} · EchoMQ</title>
<link rel="stylesheet" href="/static/app.css"><script src="/static/app.js" defer></script>
</head><body>
<header><a class="brand" href="/">EchoMQ</a><nav>{links}</nav><div class="who">{who}</div></header>
<main>{body}</main>
</body></html>"""
