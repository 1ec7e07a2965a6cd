"""The bot's pure parts: the local send window, operators' ids, the catalogue's language
choice, an update's message id and language carried through the command payload, and
what the round answer and the score notice say near a round's close."""

from __future__ import annotations

import pytest

from codemojex.bot.admin import parse_admins
from codemojex.bot.catalogue import language, text
from codemojex.bot.inbound import Verb, decode_inbound, encode_inbound, from_update, parse_command
from codemojex.bot.telegram import LocalWindow


def test_the_local_window_holds_30_overall_and_1_per_chat_per_window() -> None:
    w = LocalWindow(30, 1, 1.25)
    assert [w.wait_s(chat, 100.0) for chat in range(30)] == [0.0] * 30
    assert w.wait_s(99, 100.5) == pytest.approx(0.75)  # the 31st waits for the first to leave
    assert w.wait_s(99, 101.25) == 0.0
    assert w.wait_s(99, 102.0) == pytest.approx(0.5)  # one per chat per 1.25 s
    assert w.wait_s(99, 102.5) == 0.0


def test_a_refused_send_is_not_recorded() -> None:
    w = LocalWindow(1, 1, 1.0)
    assert w.wait_s(1, 0.0) == 0.0
    assert w.wait_s(2, 0.5) > 0  # refused: not counted
    assert w.wait_s(2, 1.0) == 0.0 and w.wait_s(2, 1.5) > 0


def test_operator_ids_are_a_list_of_integers() -> None:
    assert parse_admins("111, 222,333") == {111, 222, 333}
    assert parse_admins("") == frozenset() and parse_admins(None) == frozenset()
    with pytest.raises(ValueError, match="integers"):
        parse_admins("111,bob")


def test_the_catalogue_follows_telegrams_language_code() -> None:
    assert language("es") == language("es-AR") == language("ES") == "es"
    assert language("de") == language(None) == language("") == "en"
    assert text("es", "balance", balance=5) == "💰 Tu saldo: 5 monedas."
    assert text("xx", "balance", balance=5) == "💰 Your balance: 5 coins."


def test_an_updates_message_id_and_language_reach_the_command() -> None:
    update = {"update_id": 7, "message": {"message_id": 55, "chat": {"id": 9, "type": "private"},
                                          "from": {"id": 9, "first_name": "Ana", "language_code": "es-MX"},
                                          "text": "/top week"}}
    inbound = from_update(update)
    assert inbound is not None and (inbound.message_id, inbound.lang) == (55, "es-MX")
    assert decode_inbound(encode_inbound(inbound)) == inbound
    cmd = parse_command(inbound.text)
    assert (cmd.verb, cmd.arg) == (Verb.TOP, "week")
    assert parse_command("/daily").verb is Verb.DAILY and parse_command("/history").verb is Verb.HISTORY


def test_counts_of_guesses_read_as_words_in_both_languages() -> None:
    from codemojex.bot.replies import guess_count, settled_text

    assert [guess_count(n) for n in (0, 1, 2)] == ["0 guesses", "1 guess", "2 guesses"]
    assert [guess_count(n, "es") for n in (1, 3)] == ["1 intento", "3 intentos"]
    said = settled_text("RNDABCDEF", ("😀",) * 6, 340, 1, 0, 90)
    assert "Your best: 340/600 over 1 guess. No payout this time." in said
    assert "de 2 intentos. ¡Ganas 7 monedas!" in settled_text("RNDABCDEF", ("😀",) * 6, 340, 2, 7, 97, "es")


def test_a_payout_no_more_than_what_the_guesses_cost_is_not_called_a_win() -> None:
    from codemojex.bot.replies import settled_text

    secret = ("😀",) * 6
    back = settled_text("RNDABCDEF", secret, 40, 1, 3, 93, spent=10)
    assert "3 of the 10 coins you spent come back to you. Balance: 93 coins." in back and "won" not in back
    assert "Recuperas 3 de las 10 monedas" in settled_text("RNDABCDEF", secret, 40, 1, 3, 93, "es", spent=10)
    assert "You won 12 coins! 🎉" in settled_text("RNDABCDEF", secret, 240, 1, 12, 102, spent=10)
    assert "10 of the 10 coins you spent" in settled_text("RNDABCDEF", secret, 240, 1, 10, 100, spent=10)
    assert "No payout this time." in settled_text("RNDABCDEF", secret, 0, 2, 0, 80, spent=20)


def test_an_accepted_guess_names_the_positions_kept_from_exact_finds() -> None:
    from codemojex.bot.replies import accepted

    charged, sent = ("😀", "🍩", "🚀", "⚽", "🎸", "😎"), ("🍕", "🍩", "🚀", "⚽", "🎸", "😎")
    assert "🔒" not in accepted(charged, 10, 80, sent=charged) and "🔒" not in accepted(charged, 10, 80)
    said = accepted(charged, 10, 80, sent=sent)
    assert said.splitlines()[1] == "🔒 Kept where you found them exactly: #1 😀."


def test_a_round_with_less_than_a_second_left_is_never_announced_as_open() -> None:
    from datetime import UTC, datetime, timedelta

    from codemojex.bot.replies import round_text
    from codemojex.domain import CLASSIC

    closes = datetime(2026, 12, 4, 4, 0, tzinfo=UTC)

    def said(left_s: float, lang: str = "en") -> str:
        return round_text("RNDABCDEF", CLASSIC, 10, closes, closes - timedelta(seconds=left_s), lang)

    assert said(61.5).startswith("🎯 Round ABCDEF is open for 1m 01s.")
    assert said(1.0).startswith("🎯 Round ABCDEF is open for 1s.")
    assert said(0.4) == "⌛ Round ABCDEF is closing: it takes no more guesses. /round shows the next one."
    assert said(0.0) == said(-30) == ("⌛ Round ABCDEF has closed: it takes no more guesses."
                                      " /round shows the next one.")
    assert said(0.4, "es").startswith("⌛ La ronda ABCDEF se está cerrando")
    assert all("0s" not in said(s, lang) for s in (0.9, 0.0, -5) for lang in ("en", "es"))


def test_a_score_notice_told_after_the_close_says_so_in_its_language() -> None:
    from codemojex.bot.replies import scores_after_close, scores_text

    lines = [("😀 😎 🤖 👻 🐱 🐶", 340), ("😎 😀 🤖 👻 🐶 🐱", 120)]
    open_en, open_es = scores_text("RNDABCDEF", lines), scores_text("RNDABCDEF", lines, "es")
    assert open_en.endswith("— 120\nBest: 340/600. Final results at the close.")
    assert open_es.endswith("— 120\nMejor: 340/600. Resultados finales al cierre.")
    closed_en = scores_after_close(open_en)
    assert closed_en == scores_text("RNDABCDEF", lines, closed=True)
    assert closed_en.endswith("— 120\nBest: 340/600. The round has closed: your result follows.")
    assert scores_after_close(open_es) == scores_text("RNDABCDEF", lines, "es", closed=True)
    assert scores_after_close(open_es).endswith(
        "Mejor: 340/600. La ronda ya se cerró: tu resultado llega a continuación.")
    assert scores_after_close(closed_en) == closed_en  # told closed already: as it is
