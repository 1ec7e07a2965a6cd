"""The README's "Run the bot for real" commands, run as written in bash against the Bot API
stand-in (``CODEMOJEX_BOT_API_BASE``), with only the placeholders replaced: the token,
the operator's id, the data folder and the two ports. Polling: a player's /start is
answered, an operator's /player is answered, the metrics endpoint serves the game's
metrics. Webhook: the bot registers its URL and secret, a POST without the secret is
refused (403), one with it is answered. Each bot stops on SIGTERM with exit code 0."""

from __future__ import annotations

import asyncio
import re
import signal
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from codemojex.bot import StandIn
from tests.codemojex import seasonkit as kit

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

SECTION = "## Run the bot for real"
TOKEN = "123456789:AAE-your-token-from-BotFather"
OPERATOR = "111111111"


def _blocks() -> list[str]:
    text = (kit.ROOT / "README.md").read_text()
    section = text[text.index(SECTION):]
    section = section[:section.index("\n## ", 1)]
    return re.findall(r"```bash\n(.*?)```", section, flags=re.S)


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="codemojex-readme-") as tmp:
        yield Path(tmp)


def _script(block: str, exports: str, api: StandIn, data: Path, metrics: int, listen: int) -> str:
    assert "/var/lib/codemojex" in block and "9464" in block
    script = exports + block
    for old, new in ((TOKEN, api.token), ("/var/lib/codemojex", str(data)), ("9464", str(metrics)),
                     ("127.0.0.1:8080", f"127.0.0.1:{listen}")):
        script = script.replace(old, new)
    return script


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-3000:]


async def _start(script: str, api: StandIn, log: Path) -> asyncio.subprocess.Process:
    env = kit.env() | {"CODEMOJEX_BOT_API_BASE": api.base}
    with log.open("wb") as out:
        return await asyncio.create_subprocess_exec("bash", "-c", f"exec bash -c {_quote(script)}",
                                                    cwd=kit.ROOT, env=env, stdout=out,
                                                    stderr=asyncio.subprocess.STDOUT)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


async def _until(check: object, what: str, log: Path, timeout_s: float = 150.0) -> None:
    assert callable(check)
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not check():
        assert asyncio.get_running_loop().time() < deadline, f"{what}:\n{_tail(log)}"
        await asyncio.sleep(0.1)


async def _answer(api: StandIn, user: int, text: str) -> str:
    update = api.message_update(user, text)
    await api.push(update)
    return (await asyncio.wait_for(api.answer_to(update["message"]["message_id"]), 120)).text


async def _metrics(port: int) -> str:
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/metrics") as resp:
        assert resp.status == 200
        return await resp.text()


async def _stop(proc: asyncio.subprocess.Process, log: Path) -> None:
    proc.send_signal(signal.SIGTERM)
    code = await asyncio.wait_for(proc.wait(), 60)
    assert code == 0, _tail(log)


async def test_the_readme_runs_the_bot_with_polling_then_with_a_webhook(tmp_path: Path) -> None:
    exports, polling, webhook = _blocks()
    assert "CODEMOJEX_ADMINS=" + OPERATOR in exports and TOKEN in exports
    async with StandIn() as api:
        # Long polling, with metrics and an operator.
        metrics, log = free_port(), tmp_path / "polling.log"
        proc = await _start(_script(polling, exports, api, tmp_path / "data", metrics, 0), api, log)
        try:
            await _until(lambda: api.calls["getupdates"] > 0, "the bot polling", log)
            assert "Welcome to Codemojex" in await _answer(api, 7001, "/start")
            assert (await _answer(api, int(OPERATOR), "/player 7001")).startswith("👤 name Ada")
            assert "I don't know /player" in await _answer(api, 7001, "/player 7001")
            body = await _metrics(metrics)
            assert "codemojex_rounds{state=" in body and "codemojex_messages_sent_total" in body
        finally:
            if proc.returncode is None:
                await _stop(proc, log)
        # The webhook, on the same data: the same series and wallets.
        metrics, listen, log = free_port(), free_port(), tmp_path / "webhook.log"
        proc = await _start(_script(webhook, exports, api, tmp_path / "data", metrics, listen), api, log)
        try:
            await _until(lambda: bool(api.webhook.get("secret_token")), "setWebhook", log)
            assert api.webhook["url"] == "https://bot.example.org/telegram/webhook"
            local = f"http://127.0.0.1:{listen}/telegram/webhook"
            refused = api.message_update(7001, "/balance")
            assert await api.post_update(refused, url=local, secret="wrong") == 403
            update = api.message_update(7001, "/balance")
            assert await api.post_update(update, url=local) == 200
            answer = await asyncio.wait_for(api.answer_to(update["message"]["message_id"]), 120)
            assert answer.text == "💰 Your balance: 100 coins."  # the wallet of the polling run
            assert "codemojex_series_paused 0.0" in await _metrics(metrics)
        finally:
            if proc.returncode is None:
                await _stop(proc, log)
        assert not any(r.reply_to == refused["message"]["message_id"] for r in api.sent)
