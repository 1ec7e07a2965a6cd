"""A local stand-in for the Telegram Bot API: a real aiohttp server on loopback.

It speaks the subset the bot uses (``getMe``, ``sendMessage``, ``getUpdates``,
``setWebhook``, ``deleteWebhook``, ``answerCallbackQuery``) at
``http://127.0.0.1:<port>/bot<token>/<method>``, the URL layout aiogram uses, so
the real client runs against it unchanged
(``TelegramAPIServer.from_base(standin.base)``). For tests and the demo it can:

* answer ``sendMessage`` with 429 + ``retry_after``, 5xx, or 403 (a chat that
  blocked the bot) on demand (:meth:`fail`, :attr:`blocked`);
* hold ``sendMessage`` answers (:meth:`hold`) so a test can kill a sender mid-send;
* queue updates for ``getUpdates`` (long polling honours ``offset`` and ``timeout``)
  or post them to a webhook (:meth:`post_update`);
* record every ``sendMessage`` it received, with its monotonic arrival time and
  the status it answered (:attr:`requests`), so a test can measure rates where
  Telegram would. It binds to loopback only.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

__all__ = ["Fault", "Received", "StandIn"]


@dataclass(frozen=True, slots=True)
class Received:
    """One ``sendMessage`` as it arrived; ``status`` is what the stand-in answered."""

    chat_id: int
    text: str
    at: float  # time.monotonic() on arrival
    status: int
    reply_markup: dict[str, Any] | None = None
    reply_to: int = 0  # the message this one answers (reply_parameters.message_id), 0 if none


@dataclass(slots=True)
class Fault:
    """Answer the next ``times`` sends (to ``chat_id``, or any chat) with ``status``."""

    status: int
    times: int = 1
    chat_id: int | None = None
    retry_after: int = 1


@dataclass(slots=True)
class _State:
    faults: list[Fault] = field(default_factory=list)
    updates: deque[dict[str, Any]] = field(default_factory=deque)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    released: asyncio.Event = field(default_factory=asyncio.Event)


class StandIn:
    """Run with ``async with StandIn() as api:``; ``api.base`` is the server URL."""

    def __init__(self, *, bot_id: int = 123456, username: str = "codemojex_standin_bot") -> None:
        self.bot_id = bot_id
        self.username = username
        self.token = f"{bot_id}:STANDIN-token"
        self.requests: list[Received] = []
        self.calls: Counter[str] = Counter()  # API calls by method (lower case)
        self.replies: dict[int, list[Received]] = {}  # sends answered 200, by the message they quote
        self._answered: dict[int, asyncio.Event] = {}
        self.blocked: set[int] = set()
        self.callbacks: list[str] = []
        self.webhook: dict[str, str] = {}
        self._state = _State()
        self._state.released.set()
        self._ids = itertools.count(1)
        self._update_ids = itertools.count(1000)
        self._message_ids = itertools.count(1)
        self._new_update = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self.base = ""

    # ------------------------------------------------------------- lifecycle
    async def start(self) -> str:
        app = web.Application()
        app.router.add_route("*", "/bot{token}/{method}", self._dispatch)
        # A held or long-polling request must not keep shutdown waiting for a minute.
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.base = f"http://127.0.0.1:{port}"
        return self.base

    async def aclose(self) -> None:
        self._state.released.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> StandIn:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -------------------------------------------------------------- controls
    def fail(self, status: int, *, times: int = 1, chat_id: int | None = None, retry_after: int = 1) -> None:
        """Answer the next ``times`` sends (to ``chat_id`` or any chat) with ``status``."""
        self._state.faults.append(Fault(status, times, chat_id, retry_after))

    def hold(self) -> None:
        """Record sends on arrival but hold their answers until :meth:`release`."""
        self._state.arrived.clear()
        self._state.released.clear()

    def release(self) -> None:
        self._state.released.set()

    async def arrived(self) -> None:
        """Wait until a send arrives while held."""
        await self._state.arrived.wait()

    async def answer_to(self, message_id: int) -> Received:
        """Wait for the first send that quotes message ``message_id`` (an answer to it)."""
        await self._answered.setdefault(message_id, asyncio.Event()).wait()
        return self.replies[message_id][0]

    @property
    def sent(self) -> list[Received]:
        """The sends answered 200 (what a user would see), in arrival order."""
        return [r for r in self.requests if r.status == 200]

    def texts(self, chat_id: int) -> list[str]:
        return [r.text for r in self.sent if r.chat_id == chat_id]

    # --------------------------------------------------------------- updates
    def message_update(self, user_id: int, text: str, *, name: str = "Ada") -> dict[str, Any]:
        """A private-chat text message from ``user_id`` (a fresh ``update_id``)."""
        user = {"id": user_id, "is_bot": False, "first_name": name}
        return {"update_id": next(self._update_ids),
                "message": {"message_id": next(self._message_ids), "date": int(time.time()),
                            "chat": {"id": user_id, "type": "private"}, "from": user, "text": text}}

    def button_update(self, user_id: int, data: str, *, name: str = "Ada") -> dict[str, Any]:
        """A press of an inline button carrying ``data`` in ``user_id``'s private chat."""
        user = {"id": user_id, "is_bot": False, "first_name": name}
        msg = {"message_id": next(self._message_ids), "date": int(time.time()),
               "chat": {"id": user_id, "type": "private"}, "text": "…"}
        return {"update_id": next(self._update_ids),
                "callback_query": {"id": f"cb{next(self._ids)}", "from": user, "chat_instance": "1",
                                   "message": msg, "data": data}}

    async def push(self, update: dict[str, Any]) -> None:
        """Queue ``update`` for ``getUpdates``."""
        async with self._new_update:
            self._state.updates.append(update)
            self._new_update.notify_all()

    async def post_update(self, update: dict[str, Any], *, url: str | None = None,
                          secret: str | None = None) -> int:
        """POST ``update`` to the webhook (as Telegram would); returns the HTTP status."""
        target = url or self.webhook["url"]
        token = self.webhook.get("secret_token") if secret is None else secret
        headers = {"X-Telegram-Bot-Api-Secret-Token": token} if token else {}
        async with aiohttp.ClientSession() as session, session.post(target, json=update,
                                                                     headers=headers) as resp:
            return resp.status

    # --------------------------------------------------------------- the API
    async def _params(self, request: web.Request) -> dict[str, Any]:
        if request.content_type == "application/json":
            body = await request.json()
            return body if isinstance(body, dict) else {}
        if request.method == "POST":
            return {k: v for k, v in (await request.post()).items() if isinstance(v, str)}
        return dict(request.query)

    async def _dispatch(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return _error(401, "Unauthorized")
        method = request.match_info["method"].lower()
        self.calls[method] += 1
        params = await self._params(request)
        if method == "getme":
            return _ok({"id": self.bot_id, "is_bot": True, "first_name": "Codemojex",
                        "username": self.username})
        if method == "sendmessage":
            return await self._send(params)
        if method == "getupdates":
            return await self._get_updates(params)
        if method == "setwebhook":
            self.webhook = {k: str(v) for k, v in params.items()}
            return _ok(True)
        if method == "deletewebhook":
            self.webhook = {}
            return _ok(True)
        if method == "answercallbackquery":
            self.callbacks.append(str(params.get("callback_query_id", "")))
            return _ok(True)
        return _error(404, "Not Found: method not found")

    def _fault_for(self, chat_id: int) -> Fault | None:
        for fault in self._state.faults:
            if fault.times > 0 and fault.chat_id in (None, chat_id):
                fault.times -= 1
                return fault
        return None

    async def _send(self, params: dict[str, Any]) -> web.Response:
        try:
            chat_id = int(params.get("chat_id", ""))
        except ValueError:
            return _error(400, "Bad Request: chat not found")
        text = str(params.get("text", ""))
        if not text:
            return _error(400, "Bad Request: message text is empty")
        markup = params.get("reply_markup")
        if isinstance(markup, str):
            with contextlib.suppress(ValueError):
                markup = json.loads(markup)
        at = time.monotonic()
        fault = self._fault_for(chat_id)
        status = 403 if chat_id in self.blocked else fault.status if fault else 200
        received = Received(chat_id, text, at, status, markup if isinstance(markup, dict) else None,
                            _reply_to(params))
        self.requests.append(received)
        if not self._state.released.is_set():
            self._state.arrived.set()
            await self._state.released.wait()
        if status == 403:
            return _error(403, "Forbidden: bot was blocked by the user")
        if status == 429:
            assert fault is not None
            return _error(429, f"Too Many Requests: retry after {fault.retry_after}",
                          {"retry_after": fault.retry_after})
        if status != 200:
            return _error(status, "Internal Server Error" if status >= 500 else "Bad Request")
        if received.reply_to:
            self.replies.setdefault(received.reply_to, []).append(received)
            self._answered.setdefault(received.reply_to, asyncio.Event()).set()
        return _ok({"message_id": next(self._message_ids), "date": int(time.time()),
                    "chat": {"id": chat_id, "type": "private"}, "text": text})

    async def _get_updates(self, params: dict[str, Any]) -> web.Response:
        offset = int(params.get("offset") or 0)
        timeout = min(float(params.get("timeout") or 0), 30.0)
        limit = int(params.get("limit") or 100)
        deadline = time.monotonic() + timeout
        async with self._new_update:
            while True:
                while self._state.updates and self._state.updates[0]["update_id"] < offset:
                    self._state.updates.popleft()  # confirmed by the offset: forgotten
                if self._state.updates or time.monotonic() >= deadline:
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._new_update.wait(), deadline - time.monotonic())
            return _ok(list(itertools.islice(self._state.updates, limit)))


def _reply_to(params: dict[str, Any]) -> int:
    """The message a send answers: ``reply_parameters.message_id`` (or the older field)."""
    quoted: Any = params.get("reply_parameters")
    if isinstance(quoted, str):
        with contextlib.suppress(ValueError):
            quoted = json.loads(quoted)
    value = quoted.get("message_id") if isinstance(quoted, dict) else params.get("reply_to_message_id")
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _ok(result: Any) -> web.Response:
    return web.json_response({"ok": True, "result": result})


def _error(status: int, description: str, parameters: dict[str, Any] | None = None) -> web.Response:
    body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
    if parameters:
        body["parameters"] = parameters
    return web.json_response(body, status=status)
