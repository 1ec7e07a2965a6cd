"""Actions on dead and waiting jobs, each through the queue's own Lua transition.

=========  ==============  ==========================================================
action     jobs in         transition (:class:`echomq.AsyncQueue` method, Lua script)
=========  ==============  ==========================================================
retry      dead            ``requeue(ids)``: back to pending, fresh failure budget
delete     dead            ``purge("dead", ids)``: the row and its set entry
delete     expired         ``purge("expired", ids)``: likewise (decision 0045)
delete     pending         ``cancel(ids)``: off its set, frees a held serial lane, its row
                           kept as ``cancelled`` in the done set (decision 0023)
delete     delayed         ``cancel(ids)``
pause      (the queue)     ``pause()``: claims stop, admissions go on (``pause.lua``)
resume     (the queue)     ``resume()``: claims go on, parked consumers are woken
=========  ==============  ==========================================================

Each script re-checks every named job on the server and skips one that moved on
meanwhile (a dead job requeued by someone else is not requeued twice), so the count
it returns is what happened. Nothing here writes a key directly.

Refused before anything is read: read-only mode or no token configured (403), no or a
wrong token (401), a cross-site request (403), a malformed form (400). Every refusal
leaves the queue as it was.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode, urlparse

from aiohttp import web

from echomq.client.logical import open_queue
from echomq.core import ids as branded
from echomq.core.errors import EchoMQError, InvalidQueueName
from echomq.core.model import CancelOutcome
from echomq.ops.dashboard.state import state
from echomq.protocol.keyspace import check_queue

__all__ = ["ALLOWED", "MAX_IDS", "act"]

MAX_IDS = 100  # one page at most (page_size <= 100): one bounded script call per action
ALLOWED = {("retry", "dead"), ("delete", "dead"), ("delete", "pending"), ("delete", "delayed"),
           ("delete", "expired")}
GATE = {("pause", "queue"), ("resume", "queue")}  # the claim gate: no job ids


def _refuse(status: int, why: str, *, json: bool) -> web.Response:
    if json:
        return web.json_response({"error": why}, status=status)
    return web.Response(text=why + "\n", status=status)


def _same_origin(request: web.Request) -> bool:
    origin = request.headers.get("Origin")
    if not origin or origin == "null":
        return origin is None  # a browser always sends Origin on a form POST; "null" is opaque
    return urlparse(origin).netloc == request.host


async def act(request: web.Request) -> web.Response:
    """POST /queues/{queue}/actions with ``action``, ``state`` and one or more ``id``."""
    st = state(request)
    wants_json = "application/json" in request.headers.get("Accept", "")
    if st.options.read_only:
        return _refuse(403, "read-only mode: actions are refused", json=wants_json)
    if st.options.token is None:
        return _refuse(403, "no token is configured: actions are refused", json=wants_json)
    if not st.signed_in(request):
        return _refuse(401, "a valid token is required for actions", json=wants_json)
    if not _same_origin(request):
        return _refuse(403, "cross-site request refused", json=wants_json)
    try:
        name = check_queue(request.match_info["queue"])
    except InvalidQueueName as exc:
        return _refuse(400, str(exc), json=wants_json)
    form = await request.post()
    action, where = str(form.get("action", "")), str(form.get("state", ""))
    chosen = [str(v) for v in form.getall("id", [])]
    if (action, where) in GATE:
        return await _gate(request, name, action, form, wants_json)
    if (action, where) not in ALLOWED:
        return _refuse(400, f"cannot {action or '?'} jobs in {where or '?'}", json=wants_json)
    if not 1 <= len(chosen) <= MAX_IDS or not all(branded.valid(i) for i in chosen):
        return _refuse(400, f"choose 1..{MAX_IDS} jobs by their ids", json=wants_json)
    chosen = list(dict.fromkeys(chosen))  # a repeated id is one job
    try:
        q = await open_queue(st.connector, name)
        if action == "retry":
            done = await q.requeue(chosen)
        elif where in ("dead", "expired"):
            done = await q.purge(where, chosen)
        else:
            done = (await q.cancel(chosen)).count(CancelOutcome.CANCELLED)
    except EchoMQError as exc:
        return _refuse(503, f"the server refused: {exc}", json=wants_json)
    verb = {"retry": "requeued", "delete": "deleted"}[action]
    skipped = len(chosen) - done
    msg = f"{verb} {done} job{'s' if done != 1 else ''}" + (
        f"; {skipped} had moved on and were left as they are" if skipped else "")
    if wants_json:
        return web.json_response({"action": action, "state": where, "done": done, "skipped": skipped})
    back = str(form.get("back", ""))
    if not back.startswith("/queues/") or "//" in back:
        back = f"/queues/{name}?" + urlencode({"state": where})
    sep = "&" if "?" in back else "?"
    raise web.HTTPSeeOther(back + sep + urlencode({"msg": msg}))


async def _gate(request: web.Request, name: str, action: str, form: Any, wants_json: bool) -> web.Response:
    """Pause or resume the queue's claims (admissions go on either way)."""
    try:
        q = await open_queue(state(request).connector, name)  # sharded: every shard
        gate = await (q.pause() if action == "pause" else q.resume())
    except EchoMQError as exc:
        return _refuse(503, f"the server refused: {exc}", json=wants_json)
    if wants_json:
        return web.json_response({"action": action, "paused": gate.paused})
    back = str(form.get("back", ""))
    if not back.startswith("/queues/") or "//" in back:
        back = f"/queues/{name}"
    msg = "paused: claims stop, admissions go on" if gate.paused else "resumed: claims go on"
    raise web.HTTPSeeOther(back + ("&" if "?" in back else "?") + urlencode({"msg": msg}))
