"""What the bot says of a round's time is written as it is sent, on the server's clock
(bot/roundclock.py): a round answer written by a bot that went away before sending it is
not sent as "open for 1s" of a round that has closed since, and a score notice sent after
its round's close says the round has closed (the result follows), never "final results at
the close", and goes before the result. Real Valkey and PostgreSQL, the stand-in Bot API."""

from __future__ import annotations

from datetime import timedelta

import pytest

from codemojex.bot import BotState, CommandWorker, StandIn, TelegramDelivery, commands_queue, make_bot
from codemojex.bot.announce import ScoreBatcher, settled_note_id
from codemojex.bot.inbound import Inbound, encode_inbound, update_job_id
from codemojex.bot.replies import KIND_ACCEPTED, KIND_ROUND, KIND_SCORES, KIND_SETTLED, accepted
from codemojex.bot.roundclock import RoundClock
from codemojex.service import Services, round_of
from codemojex.service.codec import GuessJob, Note, decode_note
from codemojex.workers import Delivered
from echomq import generate
from tests.codemojex.botkit import namespace, running_bot, until, user_id
from tests.codemojex.game import eventually, make_round
from tests.codemojex.seasonkit import notice_order_faults

GUESS = ("😀", "😎", "🤖", "👻", "🐱", "🐶")
STALE = "🎯 Round … is open for 0s."  # what a note written long before its sending may say


@pytest.fixture
def state(services: Services) -> BotState:
    return BotState(services.connector, namespace(services))


async def _past_its_close(services: Services, rid: str) -> None:
    rnd = await round_of(services, rid)
    assert rnd is not None
    closes_ms = rnd.closes_at.timestamp() * 1000

    async def past() -> bool:
        return await services.connector.server_time_ms() >= closes_ms

    await eventually(past, what="the round's close on the server's clock")


async def test_a_round_answer_written_before_a_restart_tells_the_time_left_when_sent(
        services: Services) -> None:
    rid = await make_round(services.pool, closes_in=timedelta(seconds=3))
    chat = user_id()
    queue = commands_queue(services)
    # The bot that went away: it ran /round (its answer admitted) and died before sending it.
    await queue.admit(update_job_id(1, 10), encode_inbound(Inbound(10, chat, chat, "Ada", "/round")),
                      lane=str(chat), serial=True)
    (lease,) = await queue.claim(1, lease_ms=10_000)
    await CommandWorker(services).handle(lease)
    await queue.complete(lease)
    (row,) = await services.notifications.browse("pending", limit=10)
    written = decode_note(row.row["payload"])
    assert written.kind == KIND_ROUND and f"Round {rid[-6:]} is open for" in written.text
    await _past_its_close(services, rid)
    # The bot started again: its notifier sends the answer, written now.
    async with StandIn() as api, running_bot(services, api) as app:
        await until(lambda: len(api.texts(chat)) == 1, what="the answer")
    (said,) = api.texts(chat)
    assert said.startswith(f"⌛ Round {rid[-6:]} has closed: it takes no more guesses.")
    assert "is open" not in said
    assert app.round_clock.closing == 1


async def test_the_round_answer_is_written_from_the_rounds_close_at_send_time(
        services: Services, state: BotState) -> None:
    clock = RoundClock(services, state)
    player = f"tg:{user_id()}"
    hour = await make_round(services.pool)  # closes in an hour
    gone = await make_round(services.pool, closes_in=timedelta(seconds=-1))
    said = await clock.round(Note(KIND_ROUND, player, hour, STALE))
    assert said is not None and said.startswith(f"🎯 Round {hour[-6:]} is open for 59m ")
    assert "😀 😎 🤖" in said  # the set, shown
    await state.set_language(player, "es")
    said = await clock.round(Note(KIND_ROUND, player, hour, STALE))
    assert said is not None and said.startswith(f"🎯 La ronda {hour[-6:]} está abierta durante 59m ")
    said = await clock.round(Note(KIND_ROUND, player, gone, STALE))
    assert said == (f"⌛ La ronda {gone[-6:]} ya se cerró: no acepta más intentos."
                    " /round muestra la siguiente.")
    assert await clock.round(Note(KIND_ROUND, player, generate("RND"), STALE)) == STALE  # no such round
    assert clock.closing == 1


async def _scored(batcher: ScoreBatcher, player: str, rid: str, score: int) -> None:
    gid = generate("JOB")
    await batcher.on_score(gid, GuessJob(rid, player, GUESS), score)
    await batcher.on_accepted(Note(KIND_ACCEPTED, player, rid, "✅ Guess … accepted", guess=gid))


async def test_a_score_notice_sent_after_the_close_says_the_round_closed_before_the_result(
        services: Services, state: BotState) -> None:
    batcher = ScoreBatcher(services, state)
    clock = RoundClock(services, state, scores=batcher.render)
    chat = user_id()
    player = f"tg:{chat}"
    playing = await make_round(services.pool)
    closed = await make_round(services.pool, closes_in=timedelta(seconds=-1))
    for rid in (playing, closed):
        await _scored(batcher, player, rid, 300)
    said = await clock.scores(Note(KIND_SCORES, player, playing, ""))
    assert said is not None and said.endswith("Best: 300/600. Final results at the close.")
    async with StandIn() as api:
        bot = make_bot(api.token, api.base)
        delivery = TelegramDelivery(bot, state, render={KIND_SCORES: clock.scores})
        try:
            answer = Note(KIND_ACCEPTED, player, closed, accepted(GUESS, 10, 90))
            assert isinstance(await delivery.deliver(generate("JOB"), answer), Delivered)
            notice = Note(KIND_SCORES, player, closed, "")
            result = Note(KIND_SETTLED, player, closed, f"🏁 Round {closed[-6:]} settled. The secret was …")
            assert isinstance(await delivery.deliver(generate("JOB"), notice), Delivered)
            assert isinstance(await delivery.deliver(settled_note_id(player, closed), result), Delivered)
            # A notice whose turn came after the result was sent: not sent at all.
            assert isinstance(await delivery.deliver(generate("JOB"), notice), Delivered)
        finally:
            await bot.session.close()
        told = api.texts(chat)
        assert len(told) == 3 and told[0] == answer.text and told[2] == result.text
        assert told[1].startswith(f"📊 Round {closed[-6:]}, your scores so far:")
        assert told[1].endswith("Best: 300/600. The round has closed: your result follows.")
        assert "Final results at the close" not in told[1]
        assert notice_order_faults(api.requests) == []
    assert (clock.after_close, batcher.after_result) == (1, 1)
