"""A player's score notice, in order: it lists only guesses the player was told were accepted
(the delivery records each "accepted" answer Telegram took), and it is dropped once the
player's result of the round is out (the result carries the best score), so a notice
never reaches a player after that round's result (docs/decisions/0046). Real Valkey, the
stand-in Bot API; no round is played (the season and liveops tests play them)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from codemojex.bot import BotState, StandIn, TelegramDelivery, make_bot
from codemojex.bot.announce import ScoreBatcher, settled_note_id
from codemojex.bot.replies import KIND_ACCEPTED, KIND_SCORES, KIND_SETTLED
from codemojex.service import Services
from codemojex.service.codec import GuessJob, Note, encode
from codemojex.workers import Delivered, RateLimited
from echomq import generate
from tests.codemojex.botkit import namespace, user_id

G1, G2 = ("😀", "😎", "🤖", "👻", "🐱", "🐶"), ("😎", "😀", "🤖", "👻", "🐶", "🐱")


@pytest.fixture
def state(services: Services) -> BotState:
    return BotState(services.connector, namespace(services))


@pytest.fixture
def batcher(services: Services, state: BotState) -> ScoreBatcher:
    return ScoreBatcher(services, state)


async def _scored(batcher: ScoreBatcher, player: str, rid: str, emojis: tuple[str, ...], score: int) -> str:
    gid = generate("JOB")
    await batcher.on_score(gid, GuessJob(rid, player, emojis), score)
    return gid


def _accepted(player: str, rid: str, gid: str) -> Note:
    return Note(KIND_ACCEPTED, player, rid, "✅ Guess … accepted", guess=gid)


async def test_a_score_notice_lists_only_guesses_told_accepted(batcher: ScoreBatcher) -> None:
    player, rid = f"tg:{user_id()}", generate("RND")
    g1 = await _scored(batcher, player, rid, G1, 340)
    g2 = await _scored(batcher, player, rid, G2, 120)
    notice = Note(KIND_SCORES, player, rid, "")
    assert await batcher.render(notice) is None  # scored, but no acceptance told yet: not sent
    await batcher.on_accepted(_accepted(player, rid, g1))
    said = await batcher.render(notice)
    assert said is not None and "😀 😎 🤖 👻 🐱 🐶 — 340" in said and "— 120" not in said
    assert "Best: 340/600" in said
    await batcher.on_accepted(_accepted(player, rid, g2))
    said = await batcher.render(notice)
    assert said is not None and said.index("— 340") < said.index("— 120")  # best first
    await batcher.on_accepted(_accepted(player, generate("RND"), g2))  # another round's: no effect here
    assert await batcher.render(Note(KIND_SCORES, player, generate("RND"), "")) is None


async def test_a_score_notice_is_dropped_once_the_players_result_is_out(
        services: Services, batcher: ScoreBatcher, state: BotState) -> None:
    ada, bob, eve, rid = f"tg:{user_id()}", f"tg:{user_id()}", f"tg:{user_id()}", generate("RND")
    for who in (ada, bob, eve):
        await batcher.on_accepted(_accepted(who, rid, await _scored(batcher, who, rid, G1, 200)))
    queue = services.notifications
    # The results admitted (the announcer at settlement) and not sent: each waits behind its
    # player's notice on the player's serial lane, so the notice still goes, first.
    for who in (ada, bob):
        result = Note(KIND_SETTLED, who, rid, "🏁 Round … settled.")
        await queue.admit(settled_note_id(who, rid), encode(result), lane=who, serial=True)
    assert await batcher.render(Note(KIND_SCORES, ada, rid, "")) is not None
    # Ada's result sent (Telegram took it: its send record): her notice is not written.
    await state.record_sent(settled_note_id(ada, rid))
    assert await batcher.render(Note(KIND_SCORES, ada, rid, "")) is None
    # Bob's result done (acked, its send record lost): his notice is not written either.
    (lease,) = [x for x in await queue.claim(10, lease_ms=5000) if x.id == settled_note_id(bob, rid)]
    await queue.complete(lease)
    assert await batcher.render(Note(KIND_SCORES, bob, rid, "")) is None
    # Eve's result never admitted: her notice goes, until the round is told and her
    # result's row is gone (told long ago): then it is dropped.
    assert await batcher.render(Note(KIND_SCORES, eve, rid, "")) is not None
    await state.connector.command("SET", f"{state.prefix}told:{rid}", 1, "EX", 60)
    assert await batcher.render(Note(KIND_SCORES, eve, rid, "")) is None
    assert (batcher.written, batcher.after_result) == (2, 3)


@pytest.fixture
async def api() -> AsyncIterator[StandIn]:
    async with StandIn() as stand_in:
        yield stand_in


async def test_the_delivery_records_an_acceptance_only_once_telegram_took_it(
        api: StandIn, batcher: ScoreBatcher, state: BotState) -> None:
    chat, rid = user_id(), generate("RND")
    player = f"tg:{chat}"
    gid = await _scored(batcher, player, rid, G1, 300)
    bot = make_bot(api.token, api.base)
    delivery = TelegramDelivery(bot, state, after={KIND_ACCEPTED: batcher.on_accepted})
    notice = Note(KIND_SCORES, player, rid, "")
    answer, answer_id = _accepted(player, rid, gid), generate("JOB")
    try:
        api.fail(429, retry_after=1)
        assert await delivery.deliver(answer_id, answer) == RateLimited(1000)
        assert await batcher.render(notice) is None  # refused by Telegram: the player was not told
        assert isinstance(await delivery.deliver(answer_id, answer), Delivered)
        said = await batcher.render(notice)
        assert said is not None and "— 300" in said
        # A re-run after a kill between the send record and the hook records it (no resend).
        other = await _scored(batcher, player, rid, G2, 100)
        await state.record_sent(again := generate("JOB"))
        assert isinstance(await delivery.deliver(again, _accepted(player, rid, other)), Delivered)
        assert "— 100" in (await batcher.render(notice) or "")
        assert [r.status for r in api.requests] == [429, 200]
    finally:
        await bot.session.close()


def test_the_order_check_finds_each_fault_a_player_would_see() -> None:
    """The season's check of the notices (seasonkit.notice_order_faults) can fail: a notice
    after its result, a score before its acceptance, two notices of a round, a repeat only
    across a kill -9 allowed."""
    from codemojex.bot.replies import accepted
    from codemojex.bot.standin import Received
    from tests.codemojex.seasonkit import notice_order_faults

    ok, es = accepted(G1, 10, 90), accepted(G2, 10, 80, "es")  # as the bot writes them
    notice = ("📊 Round ABCDEF, your scores so far:\n😀 😎 🤖 👻 🐱 🐶 — 340\n😎 😀 🤖 👻 🐶 🐱 — 120\n"
              "Best: 340/600.")
    result = "🏁 Round ABCDEF settled. The secret was …"

    def faults(*texts: str, kills: tuple[float, ...] = ()) -> list[str]:
        return notice_order_faults([Received(7, t, float(i), 200) for i, t in enumerate(texts)], kills)

    assert faults(ok, es, notice, result) == []
    assert faults(ok, es, result, notice) == ["chat 7 round ABCDEF: score notice after the result"]
    assert faults(ok, notice, es, result) == [
        "chat 7 round ABCDEF: scores of ['😎 😀 🤖 👻 🐶 🐱'] before their acceptance"]
    assert faults(ok, es, notice, notice) == ["chat 7 round ABCDEF: 2 score notices"]
    assert faults(ok, es, notice, notice, kills=(2.5,)) == []
