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

from codemojex.domain.emoji import EmojiSet

__all__ = [
    "KIND_REPLY",
    "KIND_ROUND",
    "Keyboard",
    "chat_for",
    "keyboard_for",
    "player_id",
]

KIND_REPLY = "bot"  # an answer to a command: the menu under it
KIND_ROUND = "bot.round"  # an answer showing the round: a quick-pick button too

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
    if kind in (KIND_REPLY, "score", "payout"):
        return MENU
    return None


def _left(closes_at: datetime, now: datetime) -> str:
    s = max(0, int((closes_at - now).total_seconds()))
    return f"{s // 60}m {s % 60:02d}s" if s >= 60 else f"{s}s"


def round_text(round_id: str, emoji_set: EmojiSet, price: int, closes_at: datetime, now: datetime) -> str:
    return (f"🎯 Round {round_id[-6:]} is open for {_left(closes_at, now)}.\n"
            f"Six emojis are hidden, drawn from:\n{' '.join(emoji_set.emojis)}\n"
            f"A guess costs {price} coins: send six emojis, with or without spaces, "
            f"e.g. {' '.join(emoji_set.emojis[:6])}")


NO_ROUND = "⏳ No round is open right now; the next one starts soon. Try /round in a moment."


def welcome(name: str, balance: int, granted: int | None) -> str:
    hello = f"👋 Welcome to Codemojex, {name or 'player'}!"
    coins = f"You got {granted} starting coins." if granted else "Welcome back."
    return (f"{hello} {coins} Balance: {balance} coins.\n"
            "Guess the round's six hidden emojis; each position scores 100 − 20 per step away "
            "from where that emoji really is. The best guesses share the pot.")


def accepted(guess: Sequence[str], price: int, balance: int) -> str:
    return (f"✅ Guess {' '.join(guess)} accepted (−{price} coins, balance {balance}). "
            "Its score is on its way.")


def bad_guess(detail: str, emoji_set: EmojiSet | None) -> str:
    allowed = f"\nUse six of: {' '.join(emoji_set.emojis)}" if emoji_set else ""
    return f"🤔 That is not a valid guess: {detail}.{allowed}"


def insufficient(balance: int, price: int) -> str:
    return (f"💸 Not enough coins: a guess costs {price}, you have {balance}. "
            "Wait for a payout, or the next round's winners get the pot.")


NOT_REGISTERED = "Send /start first to join the game and get your starting coins."
CLOSED = "⌛ That round has closed. /round shows the next one."
UNAVAILABLE = "⚠️ The game could not take your guess just now; nothing was charged. Please send it again."


def balance_text(balance: int) -> str:
    return f"💰 Your balance: {balance} coins."


def leaderboard_text(rows: Sequence[tuple[str, str, int]], me: str) -> str:
    if not rows:
        return "🏆 Nobody on the board yet."
    medals = ("🥇", "🥈", "🥉")
    lines = ["🏆 Top players by coins:"]
    for i, (pid, name, coins) in enumerate(rows):
        mark = medals[i] if i < len(medals) else f"{i + 1}."
        you = " (you)" if pid == me else ""
        lines.append(f"{mark} {name or pid} — {coins}{you}")
    return "\n".join(lines)


HELP = ("Codemojex: guess the six hidden emojis of the round.\n"
        "/start — join (starting coins, once)\n"
        "/round — the current round and its emojis\n"
        "/guess 😀😎🤖👻🐱🐶 — or just send the six emojis\n"
        "/quick — a random guess\n"
        "/balance — your coins\n"
        "/top — the leaderboard\n"
        "/help — this text")


def unknown(word: str) -> str:
    return f"I don't know /{word}. " + HELP


EMPTY = "I read text only: send six emojis to guess, or /help."
