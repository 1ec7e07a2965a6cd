"""Kill -9 a notifier at each point of a send: no note is ever lost, and one is repeated only
where the kill fell while its request was out (docs/decisions/0042: at least once, since
Telegram has no idempotency key). Killed before the request leaves: sent once, by the
re-run. Killed mid-request (the Bot API got it, its answer held): sent again by the re-run,
the one duplicate the guarantee allows. Killed after Telegram's answer was recorded, before
the ack: not sent again."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from codemojex.bot import BotState, BudgetOptions, StandIn, TelegramDelivery, make_bot
from codemojex.service import Services
from codemojex.service.codec import Note, encode
from codemojex.workers import NotifyWorker
from echomq import generate
from echomq.runtime.consumer import Consumer, ConsumerOptions
from tests.codemojex.botkit import namespace, user_id
from tests.codemojex.game import eventually

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
FAST = ConsumerOptions(beat_ms=50, lease_ms=1000)
# The child imports aiogram (about 12 s of CPU) before it claims: on a loaded 2-core machine
# that alone took 57-87 s. These are bounds on waiting for a condition, not timings.
CHILD_START_S = 150


async def _child(mode: str, api: StandIn, services: Services, valkey_url: str) -> asyncio.subprocess.Process:
    env = {**os.environ, "CMX_VALKEY_URL": valkey_url, "CMX_QUEUE": services.notifications.name,
           "CMX_API_BASE": api.base, "CMX_TOKEN": api.token, "CMX_NS": namespace(services)}
    return await asyncio.create_subprocess_exec(sys.executable, "-m", "tests.codemojex.bot_child", mode,
                                                env=env, cwd=ROOT)


async def _drain_in_process(api: StandIn, services: Services, note_id: str) -> None:
    opts = BudgetOptions(namespace=namespace(services), overall=100, per_chat=100, margin_ms=0)
    bot = make_bot(api.token, api.base)
    delivery = TelegramDelivery(bot, BotState(services.connector, opts.namespace))
    consumer = Consumer(services.notifications, NotifyWorker(delivery).handle, options=FAST)
    task = asyncio.create_task(consumer.run())

    async def done() -> bool:
        row = await services.notifications.job(note_id)
        return row is not None and row["state"] == b"done"

    try:
        await eventually(done, what="the note to be finished by the second notifier")
    finally:
        consumer.stop()
        try:
            await asyncio.wait_for(task, 15)  # grace 10 s, then its handlers are cancelled
        finally:
            await bot.session.close()


async def _admit(services: Services, chat: int, text: str) -> str:
    note_id = generate("JOB")
    await services.notifications.admit(note_id, encode(Note("bot", f"tg:{chat}", "", text)),
                                       lane=f"tg:{chat}", serial=True)
    return note_id


async def test_a_notifier_killed_before_the_request_leaves_loses_nothing(
        services: Services, valkey_url: str) -> None:
    """The old loss window (a marker taken, the request not yet out): the re-run sends it."""
    chat = user_id()
    async with StandIn() as api:
        note_id = await _admit(services, chat, "before-send")
        child = await _child("before-send", api, services, valkey_url)
        try:
            await asyncio.wait_for(child.wait(), CHILD_START_S)
        finally:
            if child.returncode is None:
                child.send_signal(signal.SIGKILL)
                await child.wait()
        assert child.returncode == -signal.SIGKILL  # it killed itself as its request would leave
        assert api.requests == []  # nothing reached the Bot API
        row = await services.notifications.job(note_id)
        assert row is not None and row["state"] == b"active"
        await _drain_in_process(api, services, note_id)
        assert [r.text for r in api.requests] == ["before-send"]  # the user saw it, once
        row = await services.notifications.job(note_id)
        assert row is not None and row["attempts"] == b"2"


async def test_a_notifier_killed_mid_send_sends_it_again(services: Services, valkey_url: str) -> None:
    chat = user_id()
    async with StandIn() as api:
        api.hold()  # the send arrives, its answer never leaves while the child lives
        note_id = await _admit(services, chat, "mid-send")
        child = await _child("plain", api, services, valkey_url)
        try:
            await asyncio.wait_for(api.arrived(), CHILD_START_S)
        finally:
            if child.returncode is None:
                child.send_signal(signal.SIGKILL)
            await child.wait()
        assert child.returncode == -signal.SIGKILL
        api.release()
        row = await services.notifications.job(note_id)
        assert row is not None and row["state"] == b"active"  # never acked
        await _drain_in_process(api, services, note_id)
        # Whether the user saw the first request is unknown to the bot: it sends again.
        assert [r.text for r in api.requests] == ["mid-send", "mid-send"]
        row = await services.notifications.job(note_id)
        assert row is not None and row["attempts"] == b"2"  # it did run again, and acked


async def test_a_notifier_killed_after_the_send_does_not_send_again(
    services: Services, valkey_url: str
) -> None:
    chat = user_id()
    async with StandIn() as api:
        note_id = await _admit(services, chat, "after-send")
        child = await _child("after-send", api, services, valkey_url)
        try:
            await asyncio.wait_for(child.wait(), CHILD_START_S)
        finally:
            if child.returncode is None:  # never leave the child behind a failed wait
                child.send_signal(signal.SIGKILL)
                await child.wait()
        assert child.returncode == -signal.SIGKILL  # it killed itself right after the send
        row = await services.notifications.job(note_id)
        assert row is not None and row["state"] == b"active"  # sent, but never acked
        await _drain_in_process(api, services, note_id)
        assert [r.text for r in api.requests] == ["after-send"]  # exactly once
        row = await services.notifications.job(note_id)
        assert row is not None and row["attempts"] == b"2"  # it did run again
