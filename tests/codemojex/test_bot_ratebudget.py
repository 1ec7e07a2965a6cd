"""The shared rate budget under a burst, at Telegram's numbers: 30 messages/s for the
bot and 1/s per chat (the production :class:`BudgetOptions`, its 250 ms margin included),
kept by EchoMQ's claim gate as the notifications queue's rate limits. 150 notes to 50
chats through two notifiers (each its own Valkey connection and Telegram client). Every
grant is a lease, and its time is the **server clock's** (the lease deadline the claim
script computed, minus the lease length; arrival times at the stand-in add the event
loop's jitter on a busy machine): no one-second window holds more than 30 grants, nor
more than one for a chat, and every request to Telegram took exactly one grant. 429
answers are deferred through the queue and delivered later; nothing is lost, nothing is
sent twice, each chat in order, and no note is retried as a failure.

And a 429 longer than a notifier waits in place goes through the queue: the job is
deferred (no failure counted: it would be dead after one with ``max_attempts=1``) and
delivered after ``retry_after``."""

from __future__ import annotations

import asyncio
from collections import defaultdict

from codemojex.bot import BotState, BudgetOptions, StandIn, TelegramDelivery, apply_budget, make_bot
from codemojex.bot.standin import Received
from codemojex.service import Services
from codemojex.service.codec import Note, encode
from codemojex.workers import NotifyWorker, notify
from echomq import AsyncConnector, AsyncQueue, Consumer, Lease, Outcome, RateLimit, generate
from tests.codemojex.botkit import namespace, until, user_id

CHATS, PER_CHAT = 50, 3
WINDOW_MS = 1000  # Telegram's window
WINDOW_S = WINDOW_MS / 1000


class RecordingWorker(NotifyWorker):
    """The notifier's handler; before each note it records its lease's grant: the claim's
    time on the server clock (deadline - lease_ms) and the chat (the note's lane)."""

    grants: list[tuple[int, int]]  # (server ms, chat) of every lease, shared by the notifiers

    async def handle(self, lease: Lease) -> Outcome:
        assert lease.lane is not None and lease.lane.startswith("tg:")
        self.grants.append((lease.deadline_ms - notify.OPTIONS.lease_ms, int(lease.lane[3:])))
        return await super().handle(lease)


def _most_in_a_window(times: list[float]) -> int:
    times = sorted(times)
    most, j = 0, 0
    for i, t in enumerate(times):
        while times[j] <= t - WINDOW_S:
            j += 1
        most = max(most, i - j + 1)
    return most


async def test_a_burst_holds_telegrams_budget_rides_out_429s_and_loses_nothing(
    services: Services, valkey_url: str
) -> None:
    opts = BudgetOptions(namespace=namespace(services))  # 30/s overall, 1/s per chat: production
    assert (opts.overall, opts.per_chat, opts.window_ms) == (30, 1, WINDOW_MS)
    grants: list[tuple[int, int]] = []
    gate = await apply_budget(services.notifications, opts)
    assert (gate.rate, gate.lane_rate) == (RateLimit(30, 1250), RateLimit(1, 1250))
    chats = [7_000_000 + i for i in range(CHATS)]
    items = [(generate("JOB"), encode(Note("bot", f"tg:{c}", "", f"chat {c} note {n}")), f"tg:{c}")
             for n in range(PER_CHAT) for c in chats]
    async with StandIn() as api:
        api.fail(429, times=5, retry_after=1)  # Telegram pushing back now and then
        consumers, closers = [], []
        for _ in range(2):
            connector = AsyncConnector.from_url(valkey_url)
            bot = make_bot(api.token, api.base)
            worker = RecordingWorker(TelegramDelivery(bot, BotState(connector, opts.namespace)))
            worker.grants = grants
            queue = AsyncQueue(connector, services.notifications.name)
            consumers.append(Consumer(queue, worker.handle, options=notify.OPTIONS))
            closers += [bot.session.close, connector.aclose]
        tasks = [asyncio.create_task(c.run()) for c in consumers]
        try:
            verdicts = await services.notifications.admit_many(items, serial=True)
            assert all(v.value == "enqueued" for v in verdicts)  # type: ignore[union-attr]
            await until(lambda: len(api.sent) >= len(items), timeout_s=90, what="every note delivered")
        finally:
            for c in consumers:
                c.stop()
            await asyncio.gather(*tasks)
            for close in closers:
                await close()
    sent = [r.text for r in api.sent]
    assert len(sent) == len(set(sent)) == CHATS * PER_CHAT  # none lost, none twice
    assert sum(r.status == 429 for r in api.requests) == 5
    assert len(grants) == len(api.requests)  # every request took exactly one grant (a lease)
    by_chat: dict[int, list[Received]] = defaultdict(list)
    for r in api.requests:
        by_chat[r.chat_id].append(r)
    for chat, received in by_chat.items():  # in order per chat
        expected = [f"chat {chat} note {n}" for n in range(PER_CHAT)]
        assert [r.text for r in received if r.status == 200] == expected
    chat_grants: dict[int, list[float]] = defaultdict(list)
    for at, chat in grants:
        chat_grants[chat].append(at / 1000)
    assert max(_most_in_a_window(times) for times in chat_grants.values()) == 1  # 1/s per chat
    assert _most_in_a_window([at / 1000 for at, _ in grants]) <= 30  # 30/s overall, never more
    # ...and it binds: at most 30 per window, 155 grants take over 4 s (per chat alone: 2.2 s).
    span_s = (max(at for at, _ in grants) - min(at for at, _ in grants)) / 1000
    assert span_s >= (len(grants) - 30) / 30
    stats = await services.notifications.stats()
    assert stats.done == len(items) and stats.dead == 0
    for verdict_id, *_ in items:  # a 429 is a deferral, never a failure
        row = await services.notifications.job(verdict_id)
        assert row is not None and int(row.get("failures", b"0")) == 0


async def test_a_long_429_is_deferred_through_the_queue_without_counting_a_failure(
    services: Services, valkey_url: str
) -> None:
    opts = BudgetOptions(namespace=namespace(services))
    chat, note_id = user_id(), generate("JOB")
    async with StandIn() as api:
        api.fail(429, times=2, retry_after=2)  # twice: each defers the note through the queue
        bot = make_bot(api.token, api.base)
        await apply_budget(services.notifications, opts)
        delivery = TelegramDelivery(bot, BotState(services.connector, opts.namespace))
        # One attempt allowed: a deferral that counted as a failure would kill the job.
        await services.notifications.admit(note_id, encode(Note("bot", f"tg:{chat}", "", "hello")),
                                           lane=f"tg:{chat}", serial=True, max_attempts=1)
        consumer = Consumer(services.notifications, NotifyWorker(delivery).handle, options=notify.OPTIONS)
        task = asyncio.create_task(consumer.run())
        try:
            await until(lambda: len(api.requests) >= 2, timeout_s=30, what="the second try")
            row = await services.notifications.job(note_id)
            assert row is not None and row["state"] in (b"delayed", b"active", b"pending")
            await until(lambda: len(api.sent) == 1, timeout_s=30, what="the delivery")
        finally:
            consumer.stop()
            await task
            await bot.session.close()
    first, second, third = api.requests
    assert [r.status for r in api.requests] == [429, 429, 200] and third.text == "hello"
    assert second.at - first.at >= 2.0 and third.at - second.at >= 2.0  # each after retry_after
    assert delivery.retried_after == 2
    row = await services.notifications.job(note_id)
    assert row is not None and row["state"] == b"done"
    assert int(row.get("failures", b"0")) == 0  # deferred, never failed
    stats = await services.notifications.stats()
    assert stats.done == 1 and stats.dead == 0
