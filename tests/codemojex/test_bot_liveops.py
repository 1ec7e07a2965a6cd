"""What players and operators of a live bot get, through the stand-in and the real tree
(``BotApp.run``): one score notice and one result per player per round (secret, best
score, payout or none; the notice before the result, listing only guesses told
accepted), the daily top-up (once a day, a ledger movement), /top for the round, the
week and all time, /history, Spanish for ``language_code`` es; operators' commands for
the configured ids only (void with refunds, pause/resume, grant, player); the books
audit clean after each."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from codemojex.bot import BotApp, StandIn
from codemojex.bot.catalogue import TEXTS
from codemojex.service import Services, round_id
from codemojex.service.series import SeriesSettings, pause_series, series_status
from codemojex.wallet import audit, balance, get_round, live
from codemojex.wallet.rounds import locked_positions
from tests.codemojex.botkit import settings, until, user_id
from tests.codemojex.game import PRICE, eventually, make_round
from tests.codemojex.seasonkit import notice_order_faults

OPERATOR = 42


@asynccontextmanager
async def bot(services: Services, api: StandIn, series: SeriesSettings | None = None,
              **overrides: object) -> AsyncIterator[BotApp]:
    app = BotApp(services, dataclasses.replace(settings(services, api), **overrides), series=series)
    task = asyncio.create_task(app.run())
    try:
        yield app
    finally:
        app.stop()
        await task
        await app.aclose()


async def say(api: StandIn, user: int, text: str, *, lang: str = "en", name: str = "Ada") -> str:
    update = api.message_update(user, text, name=name)
    update["message"]["from"]["language_code"] = lang
    await api.push(update)
    return (await asyncio.wait_for(api.answer_to(update["message"]["message_id"]), 30)).text


def test_both_catalogues_have_the_same_entries_and_fields() -> None:
    import string

    def fields(t: str) -> set[str]:
        return {f for _, f, _, _ in string.Formatter().parse(t) if f}

    en, es = TEXTS["en"], TEXTS["es"]
    assert en.keys() == es.keys()
    assert all(fields(en[k]) == fields(es[k]) for k in en)


async def test_every_player_hears_one_score_notice_and_one_result_per_round(services: Services) -> None:
    ada, bob, eve = user_id(), user_id(), user_id()
    plan = SeriesSettings(round_ms=6000, price=PRICE, rounds=1)
    async with StandIn(bot_id=user_id()) as api, bot(services, api, series=plan) as app:
        await until(lambda: app.upkeep.status is not None, what="the series")
        assert app.upkeep.status is not None
        sid = app.upkeep.status.id  # kept: the status reads None once the series' one round opened
        await say(api, ada, "/start")
        await say(api, bob, "/start", lang="es-ES", name="Bob")
        await say(api, eve, "/start", name="Eve")  # never guesses: hears nothing at the close
        for guess in ("😀 😎 🤖 👻 🐱 🐶", "😎 😀 🤖 👻 🐶 🐱"):
            assert "accepted" in await say(api, ada, guess)
        assert "aceptado" in await say(api, bob, "🍕 🍩 🚀 ⚽ 🎸 ❤", lang="es-ES", name="Bob")
        rnd = await get_round(services.pool, round_id(sid, 0))
        assert rnd is not None

        def results(chat: int) -> list[str]:
            return [t for t in api.texts(chat) if t.startswith(("🏁 Round", "🏁 Ronda"))]

        await until(lambda: len(results(ada)) == 1 and len(results(bob)) == 1, timeout_s=40,
                    what="both results")
        secret = " ".join(rnd.secret)
        (a,), (b,) = results(ada), results(bob)
        assert f"The secret was {secret}." in a and "Your best:" in a and "over 2 guesses" in a
        assert f"El secreto era {secret}." in b and "de 1 intento." in b
        assert sum(w in a for w in ("You won", "come back to you", "No payout")) == 1
        assert sum(w in b for w in ("Ganas", "Recuperas", "sin premio")) == 1
        assert not results(eve)
        _, rows = await live.round_results(services.pool, rnd.id)  # what the result says was spent
        assert {r.player: r.spent for r in rows} == {f"tg:{ada}": 2 * PRICE, f"tg:{bob}": PRICE}
        for chat in (ada, bob):  # one score notice for the round, however many guesses
            assert len([t for t in api.texts(chat) if t.startswith(("📊 Round", "📊 Ronda"))]) == 1
        # ... before the result, listing only guesses whose "accepted" answer came first
        assert not notice_order_faults(api.requests)
        assert not [t for t in api.texts(ada) if "you won" in t]  # the payout note is in the result
        print("\n".join(f"{'bot' if r.chat_id == ada else '???'}: {r.text}" for r in api.sent
                        if r.chat_id == ada))
    assert (await audit(services.pool)).ok


async def test_daily_top_up_history_boards_and_spanish(services: Services) -> None:
    await make_round(services.pool)
    ada, bob = user_id(), user_id()
    async with StandIn(bot_id=user_id()) as api, bot(services, api, daily_coins=25):
        await say(api, ada, "/start")
        assert "25 daily coins added. Balance: 125" in await say(api, ada, "/daily")
        assert "already had today's coins. Balance: 125" in await say(api, ada, "/daily")
        assert "accepted" in await say(api, ada, "😀 😎 🤖 👻 🐱 🐶")
        assert "Your last rounds" in await say(api, ada, "/history")
        await until(lambda: any(t.startswith("📊") for t in api.texts(ada)), what="the score notice")
        board = await say(api, ada, "/top round")
        assert board.startswith("🏆 Best scores this round:") and "(you)" in board
        assert (await say(api, ada, "/top week")).startswith(("🏆 Most coins won", "🏆 Nobody"))
        assert (await say(api, ada, "/top")).startswith("🏆 Top players by coins:")
        assert "Recibes 100 monedas iniciales" in await say(api, bob, "/start", lang="es")
        assert "/daily — tus monedas del día" in await say(api, bob, "/help", lang="es")
        assert (await say(api, bob, "/history", lang="es")).startswith("📜 Todavía no has jugado")
    assert await balance(services.pool, f"tg:{ada}") == 125 - PRICE
    assert (await audit(services.pool)).ok


async def test_a_guess_that_keeps_found_positions_says_so(services: Services) -> None:
    """Locks: a position found exactly stays found; the answer to the next guess shows the
    guess charged and says which positions were kept, rather than a guess the player did not
    type, unexplained (the welcome's rules say so too)."""
    rid = await make_round(services.pool)  # secret 😀 😎 🤖 👻 🐱 🐶
    ada = user_id()
    async with StandIn(bot_id=user_id()) as api, bot(services, api):
        assert "stays found for the rest of the round" in await say(api, ada, "/start")
        first = await say(api, ada, "😀 🍕 🍩 🚀 ⚽ 🎸")  # position 1 exact
        assert "🔒" not in first

        async def locked() -> bool:
            return await locked_positions(services.pool, rid, f"tg:{ada}") == {0: "😀"}

        await eventually(locked, what="position 1 locked")
        again = await say(api, ada, "🍕 🍩 🚀 ⚽ 🎸 😎")
        assert again.startswith("✅ Guess 😀 🍩 🚀 ⚽ 🎸 😎 accepted")
        assert again.endswith("\n🔒 Kept where you found them exactly: #1 😀.")
        assert "🔒 Se mantienen donde ya los acertaste: #1 😀." in await say(api, ada, "🍕 🍩 🚀 ⚽ 🎸 😎",
                                                                                lang="es")


async def test_operators_void_pause_grant_and_look_up_and_nobody_else_can(services: Services) -> None:
    rid = await make_round(services.pool)
    ada, bob = user_id(), user_id()
    async with StandIn(bot_id=user_id()) as api, bot(services, api, admins=frozenset({OPERATOR})):
        for who, lang, word in ((ada, "en", "accepted"), (bob, "es", "aceptado")):
            await say(api, who, "/start", lang=lang)
            assert word in await say(api, who, "😀 😎 🤖 👻 🐱 🐶", lang=lang)
        assert "I don't know /void" in await say(api, ada, f"/void {rid}")  # not an operator
        await eventually(lambda: _scored(services, rid), what="both guesses scored")
        answer = await say(api, OPERATOR, f"/void {rid[-6:]}")
        assert f"Round {rid[-6:]} voided: {2 * PRICE} coins refunded to 2 players." == answer.split(" ", 1)[1]
        assert "voided before" in await say(api, OPERATOR, f"/void {rid}")  # idempotent
        await until(lambda: any("were refunded" in t for t in api.texts(ada))
                    and any("te hemos devuelto" in t for t in api.texts(bob)),
                    what="both players told of the refund, each in their language")
        assert await balance(services.pool, f"tg:{ada}") == 100
        if await series_status(services) is not None:  # the module's other test's series
            assert "paused" in await say(api, OPERATOR, "/pause")
            assert "already" in await say(api, OPERATOR, "/pause")
            assert "running" in await say(api, OPERATOR, "/resume")
            assert (await series_status(services)).state == "running"  # type: ignore[union-attr]
            await pause_series(services)
        assert "Granted 7 coins" in await say(api, OPERATOR, f"/grant {bob} 7")
        told = "🎁 Los operadores te han dado 7 monedas. Saldo: 107 monedas."
        await until(lambda: told in api.texts(bob), what="the player told of the grant")
        card = await say(api, OPERATOR, f"/player {bob}")
        assert "balance 107" in card and "granted 107" in card
        assert (await say(api, OPERATOR, "/grant nobody")).startswith("Operator commands:")
    books = await audit(services.pool)
    assert books.ok, books.failures


async def _scored(services: Services, rid: str) -> bool:
    async with services.pool.connection() as conn:
        row = await (await conn.execute("SELECT count(*) FILTER (WHERE score IS NULL), count(*)"
                                        " FROM guesses WHERE round_id = %s", (rid,))).fetchone()
    return row is not None and row[0] == 0 and row[1] == 2
