"""What the bot says, and the buttons under it. Pure: text in, text out.

Players who came through Telegram have the player id ``tg:<user id>``; in a
private chat the chat id is the user's id, so :func:`chat_for` finds the chat of
any note addressed to such a player (score and payout notes included) without a
lookup. Keyboards are chosen by the note's ``kind`` (:func:`keyboard_for`), so a
note on ``cm.notify`` stays a plain :class:`~codemojex.service.codec.Note`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from codemojex.bot.catalogue import LANGUAGES, text
from codemojex.domain.emoji import EmojiSet
from codemojex.wallet.live import HistoryRow

__all__ = [
    "KIND_ACCEPTED",
    "KIND_REPLY",
    "KIND_ROUND",
    "KIND_SCORES",
    "KIND_SETTLED",
    "Keyboard",
    "chat_for",
    "keyboard_for",
    "player_id",
]

KIND_REPLY = "bot"  # an answer to a command: the menu under it
KIND_ROUND = "bot.round"  # an answer showing the round: a quick-pick button too
KIND_ACCEPTED = "bot.accepted"  # the answer to a charged guess (its note carries the guess id)
KIND_SCORES = "scores"  # a player's scores in a round, batched (one per player per round)
KIND_SETTLED = "settled"  # a player's result at a round's settlement (one per player per round)

Keyboard = tuple[tuple[tuple[str, str], ...], ...]
"""Rows of (label, callback data) inline buttons."""

MENU: Keyboard = ((("🔄 Round", "/round"), ("💰 Balance", "/balance")),
                  (("🏆 Top", "/top"), ("❓ Help", "/help")))
ROUND_MENU: Keyboard = ((("🎲 Quick pick (random guess)", "/quick"),), *MENU)


def player_id(user_id: int) -> str:
    """The player id of a Telegram user."""
    return f"tg:{user_id}"


def chat_for(player: str) -> int | None:
    """The private chat of a Telegram player (``tg:<id>``), else None (no Telegram chat)."""
    head, _, tail = player.partition(":")
    if head != "tg" or not tail.lstrip("-").isdigit() or len(tail) > 20:
        return None
    return int(tail)


def keyboard_for(kind: str) -> Keyboard | None:
    """The inline keyboard shown under a note of ``kind``."""
    if kind == KIND_ROUND:
        return ROUND_MENU
    if kind in (KIND_REPLY, KIND_ACCEPTED, "score", "payout", KIND_SCORES, KIND_SETTLED):
        return MENU
    return None


def _left(closes_at: datetime, now: datetime) -> str:
    s = max(0, int((closes_at - now).total_seconds()))
    return f"{s // 60}m {s % 60:02d}s" if s >= 60 else f"{s}s"


def tag(round_id: str) -> str:
    """How a round is named to players: the last six characters of its id."""
    return round_id[-6:]


def round_text(round_id: str, emoji_set: EmojiSet, price: int, closes_at: datetime, now: datetime,
               lang: str = "en") -> str:
    """The answer showing the round, ``now`` being the moment it is written: how long it is
    open for, its set, its price. A round with less than a second left (it would read "open
    for 0s") is not announced as open: it is closing (some time left) or closed (none). The
    bot writes it again as it sends it (:class:`~codemojex.bot.roundclock.RoundClock`), so
    the time left is the time at sending."""
    left_s = (closes_at - now).total_seconds()
    if left_s < 1:
        return text(lang, "round_closing" if left_s > 0 else "round_closed", tag=tag(round_id))
    return text(lang, "round", tag=tag(round_id), left=_left(closes_at, now),
                emojis=" ".join(emoji_set.emojis), price=price, example=" ".join(emoji_set.emojis[:6]))


def no_round_text(state: str, opens_at: datetime | None, now: datetime, lang: str = "en") -> str:
    """Why no round is open, from the series' ``state`` (:class:`~codemojex.service.series.
    NextRound`): when the next opens, or that the operators paused the game, or that the
    season is over; "soon" when not known (no series, or its next round overdue)."""
    if state == "paused":
        return text(lang, "no_round_paused")
    if state == "over":
        return text(lang, "no_round_over")
    if state == "running" and opens_at is not None and opens_at > now:
        return text(lang, "no_round_in", left=_left(opens_at, now))
    return text(lang, "no_round")


def welcome(name: str, balance: int, granted: int | None, lang: str = "en") -> str:
    who = name or "player"
    hello = (text(lang, "welcome_new", name=who, granted=granted, balance=balance) if granted
             else text(lang, "welcome_back", name=who, balance=balance))
    return hello + "\n" + text(lang, "rules")


def accepted(guess: Sequence[str], price: int, balance: int, lang: str = "en", *,
             sent: Sequence[str] | None = None) -> str:
    """The answer to a charged guess. ``sent``: the guess as the player sent it; positions
    where the charged ``guess`` differs were kept from the player's exact finds (locks), and
    the answer says so, rather than showing a guess the player did not type unexplained."""
    said = text(lang, "accepted", guess=" ".join(guess), price=price, balance=balance)
    kept = [f"#{i + 1} {e}" for i, (s, e) in enumerate(zip(sent or guess, guess, strict=False)) if s != e]
    return said + ("\n" + text(lang, "kept", kept=", ".join(kept)) if kept else "")


def bad_guess(detail: str, emoji_set: EmojiSet | None, lang: str = "en") -> str:
    allowed = "\n" + text(lang, "use_six_of", emojis=" ".join(emoji_set.emojis)) if emoji_set else ""
    return text(lang, "bad_guess", detail=detail) + allowed


def insufficient(balance: int, price: int, lang: str = "en") -> str:
    return text(lang, "insufficient", balance=balance, price=price)


NO_ROUND = text("en", "no_round")
NOT_REGISTERED = text("en", "not_registered")
CLOSED = text("en", "closed")
UNAVAILABLE = text("en", "unavailable")
HELP = text("en", "help")
EMPTY = text("en", "empty")


def balance_text(balance: int, lang: str = "en") -> str:
    return text(lang, "balance", balance=balance)


def leaderboard_text(rows: Sequence[tuple[str, str, int]], me: str, lang: str = "en",
                     head: str = "board_all") -> str:
    if not rows:
        return text(lang, "board_empty")
    medals = ("🥇", "🥈", "🥉")
    lines = [text(lang, head)]
    for i, (pid, name, coins) in enumerate(rows):
        mark = medals[i] if i < len(medals) else f"{i + 1}."
        you = text(lang, "you") if pid == me else ""
        lines.append(f"{mark} {name or pid} — {coins}{you}")
    return "\n".join(lines)


def unknown(word: str, lang: str = "en") -> str:
    return text(lang, "unknown", word=word) + text(lang, "help")


def scores_text(round_id: str, lines: Sequence[tuple[str, int]], lang: str = "en", *,
                closed: bool = False) -> str:
    """The per-round score notice: every guess scored so far, one line each, then when the
    final results come: at the close, or (``closed``: written after the round's close) next,
    since a notice is never written once the player's result is out (bot/announce.py)."""
    body = "\n".join(f"{guess} — {score}" for guess, score in lines)
    said = text(lang, "scores", tag=tag(round_id), lines=body, best=max(s for _, s in lines))
    return f"{said} {text(lang, 'scores_closed' if closed else 'scores_open')}"


def scores_after_close(said: str) -> str:
    """A score notice :func:`scores_text` wrote as if its round were open, told after the
    round's close: its last sentence, "final results at the close" (now false), becomes "the
    round has closed: your result follows", in the notice's language. Any other text is
    returned as it is. (The notice's writer, bot/announce.py, does not read the clock; the
    delivery calls this at send time: :meth:`~codemojex.bot.roundclock.RoundClock.scores`.)"""
    for lang in LANGUAGES:
        tail = " " + text(lang, "scores_open")
        if said.endswith(tail):
            return f"{said.removesuffix(tail)} {text(lang, 'scores_closed')}"
    return said


def guess_count(n: int, lang: str = "en") -> str:
    """``1 guess``, ``3 guesses`` (in ``lang``)."""
    return text(lang, "guesses_one" if n == 1 else "guesses_many", n=n)


def settled_text(round_id: str, secret: Sequence[str], best: int | None, guesses: int, payout: int,
                 balance: int, lang: str = "en", *, spent: int = 0) -> str:
    """The one message at settlement: the secret, the best score, the payout or none. A
    payout no more than what the player's guesses cost (``spent``) is not called a win."""
    key = "settled_lost" if not payout else "settled_back" if payout <= spent else "settled_won"
    return text(lang, key, tag=tag(round_id), secret=" ".join(secret), best=best or 0,
                guesses=guess_count(guesses, lang), payout=payout, balance=balance, spent=spent)


def history_text(rows: Sequence[HistoryRow], lang: str = "en") -> str:
    if not rows:
        return text(lang, "history_empty")
    lines = [text(lang, "history_head")]
    for r in rows:
        if r.state != "settled":
            result = text(lang, "history_open")
        elif r.payout:
            result = text(lang, "history_paid", payout=r.payout)
        else:
            result = text(lang, "history_unpaid")
        secret = f" ({' '.join(r.secret)})" if r.secret else ""
        lines.append(text(lang, "history_row", tag=tag(r.round_id), guesses=guess_count(r.guesses, lang),
                          best=r.best if r.best is not None else "…", payout=result) + secret)
    return "\n".join(lines)


def daily_text(coins: int | None, balance: int, lang: str = "en") -> str:
    if coins:
        return text(lang, "daily_granted", coins=coins, balance=balance)
    return text(lang, "daily_taken", balance=balance)
