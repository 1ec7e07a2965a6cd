"""The Telegram delivery classifies each send: sent → ack, 429 → defer (waited out when short),
5xx → backoff, blocked → ack and remembered; a note already sent is not sent again."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from codemojex.bot import BotState, BudgetOptions, StandIn, TelegramDelivery, make_bot
from codemojex.service import Services
from codemojex.service.codec import Note, encode
from codemojex.workers import Delivered, Failed, NotifyWorker, RateLimited
from echomq import generate
from echomq.core.model import Lease
from echomq.core.outcomes import Ack, Backoff, Defer
from tests.codemojex.botkit import namespace, user_id


@pytest.fixture
async def api() -> AsyncIterator[StandIn]:
    async with StandIn() as stand_in:
        yield stand_in


@pytest.fixture
async def delivery(api: StandIn, services: Services) -> AsyncIterator[TelegramDelivery]:
    opts = BudgetOptions(namespace=namespace(services), overall=100, per_chat=100, margin_ms=0)
    bot = make_bot(api.token, api.base)
    yield TelegramDelivery(bot, BotState(services.connector, opts.namespace))
    await bot.session.close()


def _lease(chat: int, text: str) -> Lease:
    return Lease("cm.notify", generate("JOB"), 1, encode(Note("bot", f"tg:{chat}", "", text)), None, 0)


async def test_each_answer_is_classified(api: StandIn, delivery: TelegramDelivery) -> None:
    worker, chat = NotifyWorker(delivery), user_id()
    api.fail(429, retry_after=2)  # deferred through the queue: its next lease takes a token
    assert await worker.handle(_lease(chat, "a")) == Defer(delay_ms=2000)
    api.fail(502)
    outcome = await worker.handle(_lease(chat, "b"))
    assert isinstance(outcome, Backoff) and "Server" in outcome.error
    assert 800 <= (outcome.delay_ms or 0) <= 1200  # the delivery's own backoff: 1 s ± 20%
    assert await worker.handle(_lease(chat, "c")) == Ack()
    api.blocked.add(chat)
    assert await worker.handle(_lease(chat, "d")) == Ack()  # blocked: acked, remembered
    assert await delivery.state.is_blocked(chat)
    assert await worker.handle(_lease(chat, "e")) == Ack()  # not even tried
    assert [(r.text, r.status) for r in api.requests] == [("a", 429), ("b", 502), ("c", 200), ("d", 403)]


async def test_a_short_429_is_deferred_and_a_sent_note_is_not_sent_again(
        api: StandIn, delivery: TelegramDelivery) -> None:
    """Even a 1 s 429 is not sent again in place (that request would take no lease of the
    budget): the note is deferred by retry_after, and its next lease sends it."""
    chat, note_id = user_id(), generate("JOB")
    note = Note("bot", f"tg:{chat}", "", "hello")
    api.fail(429, retry_after=1)
    assert await delivery.deliver(note_id, note) == RateLimited(1000)
    assert isinstance(await delivery.deliver(note_id, note), Delivered)  # the next lease
    assert isinstance(await delivery.deliver(note_id, note), Delivered)  # a re-run after a crash
    assert [r.status for r in api.requests] == [429, 200] and delivery.retried_after == 1
    assert isinstance(await delivery.deliver(generate("JOB"), Note("score", "sim-1", "", "x")), Delivered)
    assert delivery.skipped == 1 and len(api.requests) == 2  # no Telegram chat: nothing sent


async def test_a_network_error_is_a_failure(services: Services, delivery: TelegramDelivery) -> None:
    bot = make_bot("1:x", "http://127.0.0.1:9")  # nothing listens on the discard port
    broken = TelegramDelivery(bot, delivery.state)
    try:
        result = await broken.deliver(generate("JOB"), Note("bot", f"tg:{user_id()}", "", "x"))
    finally:
        await bot.session.close()
    assert isinstance(result, Failed) and "Network" in result.error and not isinstance(result, RateLimited)
