"""The shared rate budget under a burst: 500 notes to 50 chats through two notifiers (each
its own Valkey connection and Telegram client). Measured at the stand-in by arrival times:
no one-second window holds more than the budget overall or per chat; 429 answers are waited
out and delivered later; nothing is lost, nothing is sent twice, each chat in order.

The budget is configured smaller than Telegram's (100/s overall and 5/s per chat instead of
30/s and 1/s) so the burst drains in about seven seconds instead of seventeen; the mechanism
is the same."""

from __future__ import annotations

import asyncio
from collections import defaultdict

from codemojex.bot import BotState, BudgetOptions, RateBudget, StandIn, TelegramDelivery, make_bot
from codemojex.bot.standin import Received
from codemojex.service import Services
from codemojex.service.codec import Note, encode
from codemojex.workers import NotifyWorker, notify
from echomq import AsyncConnector, AsyncQueue, generate
from echomq.consumer import Consumer
from tests.codemojex.botkit import namespace, until

CHATS, PER_CHAT = 50, 10
BUDGET = dict(overall=100, per_chat=5)
# The stand-in shares one event loop (and two busy cores) with both notifiers, so arrival
# jitter is larger here than between a notifier and Telegram: the window is padded more
# than the default 100 ms (300 ms was seen to let 106 arrivals into one second under load).
MARGIN_MS = 600
WINDOW_S = 1.0


def _most_in_a_window(times: list[float]) -> int:
    times = sorted(times)
    most, j = 0, 0
    for i, t in enumerate(times):
        while times[j] <= t - WINDOW_S:
            j += 1
        most = max(most, i - j + 1)
    return most


async def test_a_burst_holds_the_budget_rides_out_429s_and_loses_nothing(
    services: Services, valkey_url: str
) -> None:
    opts = BudgetOptions(namespace=namespace(services), margin_ms=MARGIN_MS, **BUDGET)
    chats = [7_000_000 + i for i in range(CHATS)]
    items = [(generate("JOB"), encode(Note("bot", f"tg:{c}", "", f"chat {c} note {n}")), f"tg:{c}")
             for n in range(PER_CHAT) for c in chats]
    async with StandIn() as api:
        api.fail(429, times=15, retry_after=1)  # Telegram pushing back now and then
        consumers, closers = [], []
        for _ in range(2):
            connector = AsyncConnector.from_url(valkey_url)
            bot = make_bot(api.token, api.base)
            delivery = TelegramDelivery(bot, RateBudget(connector, opts), BotState(connector, opts.namespace))
            queue = AsyncQueue(connector, services.notifications.name)
            consumers.append(Consumer(queue, NotifyWorker(delivery).handle, options=notify.OPTIONS))
            closers += [bot.session.close, connector.aclose]
        tasks = [asyncio.create_task(c.run()) for c in consumers]
        try:
            verdicts = await services.notifications.admit_many(items, serial=True)
            assert all(v.value == "enqueued" for v in verdicts)  # type: ignore[union-attr]
            await until(lambda: len(api.sent) >= len(items), timeout_s=60, what="every note delivered")
        finally:
            for c in consumers:
                c.stop()
            await asyncio.gather(*tasks)
            for close in closers:
                await close()
    sent = [r.text for r in api.sent]
    assert len(sent) == len(set(sent)) == CHATS * PER_CHAT  # none lost, none twice
    assert sum(r.status == 429 for r in api.requests) == 15
    by_chat: dict[int, list[Received]] = defaultdict(list)
    for r in api.requests:
        by_chat[r.chat_id].append(r)
    for chat, received in by_chat.items():  # in order per chat
        expected = [f"chat {chat} note {n}" for n in range(PER_CHAT)]
        assert [r.text for r in received if r.status == 200] == expected
        assert _most_in_a_window([r.at for r in received]) <= BUDGET["per_chat"]
    assert _most_in_a_window([r.at for r in api.requests]) <= BUDGET["overall"]
    stats = await services.notifications.stats()
    assert stats.done == len(items) and stats.dead == 0
