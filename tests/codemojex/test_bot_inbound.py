"""Pure parts of the bot: reading updates and commands, derived ids, chats of players."""

from __future__ import annotations

import pytest

from codemojex.bot.inbound import (
    Verb,
    decode_inbound,
    encode_inbound,
    from_update,
    parse_command,
    update_job_id,
)
from codemojex.bot.replies import chat_for, player_id
from codemojex.service.codec import BadPayload
from echomq.core import ids


def _msg(text: object, chat_type: str = "private", **extra: object) -> dict[str, object]:
    user = {"id": 42, "is_bot": False, "first_name": "Ada"}
    return {"update_id": 7, "message": {"message_id": 1, "date": 0, "from": user,
                                        "chat": {"id": 42, "type": chat_type}, "text": text, **extra}}


def test_a_private_message_becomes_an_inbound_that_round_trips() -> None:
    inbound = from_update(_msg("/start"))
    assert inbound is not None and (inbound.chat_id, inbound.user_id, inbound.text) == (42, 42, "/start")
    assert decode_inbound(encode_inbound(inbound)) == inbound


@pytest.mark.parametrize("update", [None, [], "x", {"update_id": "7"}, {"update_id": 7},
                                    _msg("/start", "group"), _msg("/start", "channel"),
                                    {"update_id": 7, "edited_message": {}},
                                    {"update_id": 7, "callback_query": {"id": "", "data": "/round"}}])
def test_updates_the_bot_does_not_act_on_are_ignored(update: object) -> None:
    assert from_update(update) is None


def test_a_message_without_text_is_an_empty_command() -> None:
    inbound = from_update(_msg(None, sticker={"file_id": "x"}))
    assert inbound is not None and parse_command(inbound.text).verb is Verb.EMPTY


def test_update_job_ids_are_deterministic_valid_and_distinct() -> None:
    a = update_job_id(1, 100)
    assert a == update_job_id(1, 100) and ids.valid(a) and a.startswith("JOB")
    assert len({a, update_job_id(1, 101), update_job_id(2, 100)}) == 3


@pytest.mark.parametrize(("text", "verb", "arg"), [
    ("/start", Verb.START, ""), ("/start deep-link", Verb.START, "deep-link"),
    ("/round@codemojex_bot", Verb.ROUND, ""), ("/GUESS 😀 😎", Verb.GUESS, "😀 😎"),
    ("😀😎🤖👻🐱🐶", Verb.GUESS, "😀😎🤖👻🐱🐶"), ("  hello ", Verb.GUESS, "hello"),
    ("/top", Verb.TOP, ""), ("/leaderboard", Verb.TOP, ""), ("/balance", Verb.BALANCE, ""),
    ("/help", Verb.HELP, ""), ("/quick", Verb.QUICK, ""), ("/nope x", Verb.UNKNOWN, "x"),
    ("", Verb.EMPTY, ""), ("   ", Verb.EMPTY, ""), ("/", Verb.UNKNOWN, ""),
])
def test_commands_are_read_from_text(text: str, verb: Verb, arg: str) -> None:
    cmd = parse_command(text)
    assert (cmd.verb, cmd.arg) == (verb, arg)


def test_payloads_the_bot_did_not_write_are_refused() -> None:
    bool_user = b'{"v":1,"t":"tg","u":1,"c":1,"f":true,"n":"","x":"","q":""}'
    for data in (b"", b"[]", b'{"v":1,"t":"tg"}', bool_user):
        with pytest.raises(BadPayload):
            decode_inbound(data)


def test_telegram_players_map_to_their_private_chat() -> None:
    assert chat_for(player_id(42)) == 42
    assert chat_for("sim-abc-0001") is None and chat_for("tg:") is None and chat_for("tg:x1") is None
