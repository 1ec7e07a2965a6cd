"""A scripted conversation through the stand-in (long polling in, aiogram out): start, round,
guesses (valid, invalid, insufficient coins), balance, leaderboard, help, unknown commands,
a message without text, and the buttons (balance, quick pick). Every one of them is sent;
the replies are the expected ones, in order per chat, each once."""

from __future__ import annotations

from codemojex.bot import StandIn
from codemojex.domain import score
from codemojex.service import Services
from codemojex.wallet import balance
from tests.codemojex.botkit import running_bot, until, user_id
from tests.codemojex.game import PRICE, SECRET, make_round

GUESS = "😀😎🤖👻🍕🐶"  # typed without spaces; positions 0, 1, 2, 3, 5 exact


def _replies(api: StandIn, chat: int) -> list[str]:
    """What the chat saw, without the score notes (they come from the score consumer,
    concurrently with the command replies)."""
    return [t for t in api.texts(chat) if not t.startswith("📊")]


async def test_a_scripted_conversation_gets_the_expected_replies_in_order(services: Services) -> None:
    rid = await make_round(services.pool)
    ada, bob = user_id(), user_id()
    script = ["/start", "/round", GUESS, "hello there", "/guess 😀 😀", "/guess 🍕 🍩 🚀 ⚽ 🎸 ❤",
              "/balance", "/top", "/help", "/nonsense", ""]
    async with StandIn() as api, running_bot(services, api, start_coins=PRICE + 5) as app:
        for text in script:
            await api.push(api.message_update(ada, text, name="Ada"))
        await api.push(api.message_update(bob, "/start", name="Bob"))
        await api.push(api.button_update(bob, "/balance", name="Bob"))
        await api.push(api.button_update(ada, "/quick", name="Ada"))
        await until(lambda: len(_replies(api, ada)) == 13 and len(_replies(api, bob)) == 3,
                    what="every reply")
        await until(lambda: any(t.startswith("📊") for t in api.texts(ada)), what="the score notice")
        a, b = _replies(api, ada), _replies(api, bob)
        assert "You got 15 starting coins" in a[0] and "Balance: 15 coins" in a[0]
        assert f"Round {rid[-6:]} is open" in a[1] and "😀 😎 🤖" in a[1]  # the set, shown
        assert f"Round {rid[-6:]} is open" in a[2]
        assert "Guess 😀 😎 🤖 👻 🍕 🐶 accepted (−10 coins, balance 5)" in a[3]
        assert "not a valid guess" in a[4] and "this one has 10" in a[4]  # "hello there"
        assert "not a valid guess" in a[5] and "this one has 2" in a[5]
        assert "Not enough coins: a guess costs 10, you have 5" in a[6]
        assert a[7] == "💰 Your balance: 5 coins."
        assert "🏆 Top players" in a[8] and "Ada — 5 (you)" in a[8]
        assert a[9].startswith("Codemojex: guess the six hidden emojis") and "/top" in a[9]  # /help
        assert "I don't know /nonsense" in a[10]
        assert "I read text only" in a[11]
        assert "Not enough coins" in a[12]  # the quick-pick button, with 5 coins left
        assert "You got 15 starting coins" in b[0] and "is open" in b[1]
        assert b[2] == "💰 Your balance: 15 coins."
        (scored,) = [t for t in api.texts(ada) if t.startswith("📊")]  # one per player per round
        total = score(SECRET, ("😀", "😎", "🤖", "👻", "🍕", "🐶")).total
        assert f"😀 😎 🤖 👻 🍕 🐶 — {total}\nBest: {total}/600" in scored
        assert len(api.callbacks) == 2  # both button presses answered
        assert await balance(services.pool, f"tg:{ada}") == 5  # charged once, for the one valid guess
        assert len(api.sent) == len(api.requests)  # nothing refused, nothing sent twice
        assert app.ingress.admitted == len(script) + 3
        menu = api.sent[0].reply_markup
        assert menu is not None and "inline_keyboard" in menu
