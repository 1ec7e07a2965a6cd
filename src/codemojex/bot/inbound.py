"""Telegram updates in, commands out: the pure half of the bot's ingress. No I/O.

* :func:`from_update` turns one Bot API ``Update`` (a JSON object) into an
  :class:`Inbound` (the little the command consumer needs), or None for updates the
  bot does not act on (edits, channel posts, group chats, service messages). It
  never raises for any JSON value.
* :func:`update_job_id` is the command job's id: derived from the bot's id and the
  ``update_id``, so a redelivered update (Telegram retries a webhook until it gets
  a 2xx; ``getUpdates`` repeats unconfirmed updates) is refused as DUPLICATE.
* :func:`parse_command` reads what a player typed or tapped: ``/start``,
  ``/round``, ``/guess …``, ``/balance``, ``/top`` (``/leaderboard``; ``round`` or
  ``week`` after it), ``/daily``, ``/history``, ``/help``, ``/quick``, an operator's
  command (:mod:`codemojex.bot.admin`), or free text (a guess, with or without spaces). Pure, total.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any

from codemojex.service.codec import BadPayload, derive_id

__all__ = [
    "MAX_TEXT",
    "Command",
    "Inbound",
    "Verb",
    "decode_inbound",
    "encode_inbound",
    "from_update",
    "parse_command",
    "update_job_id",
]

MAX_TEXT = 1024  # a Telegram message holds 4096 characters; a command or a guess needs far fewer


@dataclass(frozen=True, slots=True)
class Inbound:
    """One update the bot acts on: a private message or an inline-button press."""

    update_id: int
    chat_id: int
    user_id: int
    name: str
    text: str  # the message text, or the button's callback data
    callback_id: str = ""  # set for a button press (answered with answerCallbackQuery)
    message_id: int = 0  # the message typed (0 for a button press): the replies quote it
    lang: str = ""  # the user's Telegram language_code ("" when not given)


def update_job_id(bot_id: int, update_id: int) -> str:
    """The command job's id for update ``update_id`` of bot ``bot_id`` (deterministic)."""
    return derive_id("JOB", "tg-update", f"{bot_id}:{update_id}")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _name(user: dict[str, Any]) -> str:
    first = user.get("first_name")
    return first[:64] if isinstance(first, str) else ""


def from_update(update: Any) -> Inbound | None:
    """The :class:`Inbound` of a Bot API update, or None if the bot does not act on it."""
    if not isinstance(update, dict):
        return None
    uid = _int(update.get("update_id"))
    if uid is None:
        return None
    message, callback = update.get("message"), update.get("callback_query")
    data: Any
    cb: Any
    mid = 0
    if isinstance(message, dict):
        chat, user, data, cb = message.get("chat"), message.get("from"), message.get("text"), ""
        mid = _int(message.get("message_id")) or 0
    elif isinstance(callback, dict):
        msg = callback.get("message")
        chat = msg.get("chat") if isinstance(msg, dict) else None
        user, data, cb = callback.get("from"), callback.get("data"), callback.get("id")
        if not isinstance(cb, str) or not cb:
            return None
    else:
        return None
    # The game is played in private chats, where the chat id is the user's id.
    if not (isinstance(chat, dict) and isinstance(user, dict) and chat.get("type") == "private"):
        return None
    chat_id, user_id = _int(chat.get("id")), _int(user.get("id"))
    if chat_id is None or user_id is None or user.get("is_bot") is True:
        return None
    text = data if isinstance(data, str) else ""
    code = user.get("language_code")
    lang = code[:16] if isinstance(code, str) else ""
    return Inbound(uid, chat_id, user_id, _name(user), text[:MAX_TEXT], cb, mid if mid > 0 else 0, lang)


def encode_inbound(value: Inbound) -> bytes:
    """The command job's payload (compact JSON, versioned; never pickle)."""
    body = {"v": 1, "t": "tg", "u": value.update_id, "c": value.chat_id, "f": value.user_id,
            "n": value.name, "x": value.text, "q": value.callback_id}
    if value.message_id:
        body["m"] = value.message_id
    if value.lang:
        body["l"] = value.lang
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def decode_inbound(data: bytes) -> Inbound:
    """Decode :func:`encode_inbound`'s bytes; :class:`BadPayload` for anything else."""
    try:
        body = json.loads(data)
    except (ValueError, TypeError) as exc:
        raise BadPayload(f"not JSON: {exc}") from None
    if not isinstance(body, dict) or body.get("v") != 1 or body.get("t") != "tg":
        raise BadPayload("not a v1 tg payload")
    ints = [_int(body.get(k)) for k in ("u", "c", "f")]
    strs = [body.get(k) for k in ("n", "x", "q")]
    if any(i is None for i in ints) or not all(isinstance(s, str) for s in strs):
        raise BadPayload("malformed tg payload")
    u, c, f = (int(i) for i in ints if i is not None)
    n, x, q = (str(s) for s in strs)
    m, lang = _int(body.get("m", 0)), body.get("l", "")
    if m is None or m < 0 or not isinstance(lang, str):
        raise BadPayload("malformed tg payload")
    return Inbound(u, c, f, n, x, q, m, lang)


class Verb(enum.Enum):
    START = "start"
    ROUND = "round"
    GUESS = "guess"
    QUICK = "quick"  # a random guess, for the impatient (the button "🎲")
    BALANCE = "balance"
    TOP = "top"
    DAILY = "daily"
    HISTORY = "history"
    HELP = "help"
    UNKNOWN = "unknown"  # a /command the bot does not know
    EMPTY = "empty"  # no text (a sticker, a photo, an empty button)


_VERBS = {
    "start": Verb.START, "round": Verb.ROUND, "r": Verb.ROUND, "guess": Verb.GUESS, "g": Verb.GUESS,
    "quick": Verb.QUICK, "random": Verb.QUICK, "balance": Verb.BALANCE, "b": Verb.BALANCE,
    "top": Verb.TOP, "leaderboard": Verb.TOP, "help": Verb.HELP, "daily": Verb.DAILY,
    "history": Verb.HISTORY,
}


@dataclass(frozen=True, slots=True)
class Command:
    """What the player asked for; ``arg`` is the rest of the text (the guess for GUESS)."""

    verb: Verb
    arg: str = ""
    word: str = ""  # the command word as typed (for UNKNOWN's answer)


def parse_command(text: str) -> Command:
    """Read a message or a button's data. Free text is a guess; never raises."""
    stripped = text.strip() if isinstance(text, str) else ""
    if not stripped:
        return Command(Verb.EMPTY)
    if not stripped.startswith("/"):
        return Command(Verb.GUESS, stripped)
    head, _, rest = stripped[1:].partition(" ")
    word = head.split("@", 1)[0].lower()  # "/round@codemojex_bot" in a menu tap
    verb = _VERBS.get(word)
    if verb is None:
        return Command(Verb.UNKNOWN, rest.strip(), word[:32])
    return Command(verb, rest.strip(), word)
