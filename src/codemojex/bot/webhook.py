"""The webhook: an aiohttp endpoint Telegram POSTs updates to.

* The ``X-Telegram-Bot-Api-Secret-Token`` header (the ``secret_token`` given to
  ``setWebhook``) is compared in constant time (:func:`hmac.compare_digest`);
  a missing or wrong one is answered 403 and admits nothing.
* A good request is admitted onto ``cm.commands`` (:class:`~codemojex.bot.ingress.Ingress`)
  and answered 200 at once; game logic never runs in the request.
* If Valkey cannot take the update the answer is 503: Telegram delivers it again
  later, and the derived job id makes that redelivery a duplicate if the first
  admission did land.
* A body that is not JSON is answered 400; an update the bot does not act on, 200.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import re

from aiohttp import web

from codemojex.bot.ingress import Ingress
from codemojex.domain.errors import ConfigurationError

__all__ = ["HEADER", "WebhookServer", "check_secret", "webhook_app"]

log = logging.getLogger("codemojex.bot.webhook")

HEADER = "X-Telegram-Bot-Api-Secret-Token"
_SECRET = re.compile(r"[A-Za-z0-9_-]{1,256}")  # what setWebhook accepts as secret_token
MAX_BODY = 1 << 20  # an update is a few KiB; refuse anything near a megabyte


def check_secret(secret: str) -> str:
    """``secret`` if Telegram accepts it as a webhook secret (1–256 of A-Z a-z 0-9 _ -)."""
    if not isinstance(secret, str) or not _SECRET.fullmatch(secret):
        raise ConfigurationError("a webhook secret is 1-256 characters of A-Z, a-z, 0-9, _ and -")
    return secret


def webhook_app(ingress: Ingress, *, secret: str, path: str = "/telegram/webhook") -> web.Application:
    """The aiohttp application serving the webhook at ``path``."""
    expected = check_secret(secret).encode()

    async def receive(request: web.Request) -> web.Response:
        given = request.headers.get(HEADER, "").encode("utf-8", "surrogateescape")
        if not hmac.compare_digest(given, expected):
            return web.json_response({"ok": False, "error": "forbidden"}, status=403)
        try:
            update = await request.json()
        except ValueError:
            return web.json_response({"ok": False, "error": "not JSON"}, status=400)
        try:
            await ingress.admit(update)
        except Exception as exc:
            log.warning("update not admitted (%r); answering 503 so Telegram retries", exc)
            return web.json_response({"ok": False, "error": "try again"}, status=503)
        return web.json_response({"ok": True})

    app = web.Application(client_max_size=MAX_BODY)
    app.router.add_post(path, receive)
    return app


class WebhookServer:
    """Serves :func:`webhook_app` on ``host:port`` (a supervised child: :meth:`run`/:meth:`stop`)."""

    def __init__(self, ingress: Ingress, *, secret: str, host: str = "127.0.0.1", port: int = 8080,
                 path: str = "/telegram/webhook") -> None:
        self.app = webhook_app(ingress, secret=secret, path=path)
        self.host, self.port, self.path = host, port, path
        self.url = ""  # the local URL once listening
        self.listening = asyncio.Event()
        self._stop = asyncio.Event()

    async def run(self) -> None:
        runner = web.AppRunner(self.app, access_log=None, shutdown_timeout=5.0)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host, self.port)
            await site.start()
            host, port = runner.addresses[0][:2]
            self.url = f"http://{host}:{port}{self.path}"
            self.listening.set()
            self._stop.clear()
            await self._stop.wait()
        finally:
            self.listening.clear()
            await runner.cleanup()

    def stop(self) -> None:
        self._stop.set()
