"""What a live bot asks the wallet beyond a guess: results, boards, history, the daily top-up.

Reads are one read-only statement each, retried on a transient failure within the
wallet's bound (:func:`~codemojex.wallet.tx.retried`). The daily top-up is a grant like
the start grant: one movement from the house, its ref ``daily:<player>:<YYYY-MM-DD>``
(the day on the database's clock, UTC), so any number of tries on one day applies once
and the audit sees an ordinary grant.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from psycopg_pool import AsyncConnectionPool

from codemojex.wallet.amounts import amount as checked
from codemojex.wallet.locks import lock
from codemojex.wallet.money import HOUSE, _add_balance, _move, player_account
from codemojex.wallet.results import AlreadyApplied, Granted, UnknownPlayer
from codemojex.wallet.tx import retried, transaction

__all__ = [
    "GameStats",
    "HistoryRow",
    "PlayerResult",
    "daily_ref",
    "daily_topup",
    "game_stats",
    "history",
    "player_card",
    "recent_rounds",
    "round_board",
    "round_results",
    "settled_since",
    "week_board",
]


@dataclass(frozen=True, slots=True)
class PlayerResult:
    """One player's round: how many guesses, the best score, the payout (0: none)."""

    player: str
    name: str
    guesses: int
    best: int | None  # None while a guess is unscored
    payout: int
    balance: int = 0  # the player's balance when read
    spent: int = 0  # coins the player's guesses in the round cost


@dataclass(frozen=True, slots=True)
class HistoryRow:
    round_id: str
    state: str
    closes_at: datetime
    guesses: int
    best: int | None
    payout: int
    secret: tuple[str, ...] | None  # revealed once the round is settled


def daily_ref(player: str, day: str) -> str:
    return f"daily:{player}:{day}"


@retried
async def settled_since(pool: AsyncConnectionPool, seconds: int) -> list[str]:
    """Rounds settled within the last ``seconds`` (database clock), oldest first."""
    async with transaction(pool, read_only=True) as conn:
        cur = await conn.execute(
            "SELECT id FROM rounds WHERE state = 'settled'"
            " AND settled_at > now() - make_interval(secs => %s)"
            " AND NOT EXISTS (SELECT 1 FROM voided_rounds v WHERE v.round_id = rounds.id)"  # told at the void
            " ORDER BY settled_at, id", (seconds,))
        return [str(r[0]) for r in await cur.fetchall()]


@retried
async def recent_rounds(pool: AsyncConnectionPool, limit: int = 50) -> list[str]:
    """The ids of the ``limit`` rounds opened last, newest first."""
    async with transaction(pool, read_only=True) as conn:
        cur = await conn.execute("SELECT id FROM rounds ORDER BY opens_at DESC, id DESC LIMIT %s", (limit,))
        return [str(r[0]) for r in await cur.fetchall()]


@retried
async def round_results(pool: AsyncConnectionPool,
                        round_id: str) -> tuple[tuple[str, ...], list[PlayerResult]]:
    """The round's secret and every player who guessed in it (by best score, then id)."""
    async with transaction(pool, read_only=True) as conn:
        cur = await conn.execute("SELECT secret FROM rounds WHERE id = %s", (round_id,))
        row = await cur.fetchone()
        if row is None:
            return (), []
        cur = await conn.execute(
            "SELECT g.player_id, p.name, count(*), max(g.score), coalesce(max(y.amount), 0), p.balance,"
            " count(*) * r.guess_price"
            " FROM guesses g JOIN players p ON p.id = g.player_id JOIN rounds r ON r.id = g.round_id"
            " LEFT JOIN payouts y ON y.round_id = g.round_id AND y.player_id = g.player_id"
            " WHERE g.round_id = %s GROUP BY g.player_id, p.name, p.balance, r.guess_price"
            " ORDER BY max(g.score) DESC NULLS LAST, g.player_id", (round_id,))
        results = [PlayerResult(str(p), str(n), int(c), None if b is None else int(b), int(a), int(bal),
                                int(spent))
                   for p, n, c, b, a, bal, spent in await cur.fetchall()]
    return tuple(row[0]), results


@retried
async def round_board(pool: AsyncConnectionPool, round_id: str,
                      limit: int = 10) -> list[tuple[str, str, int]]:
    """The round's best scores so far: (player, name, best), best first."""
    async with transaction(pool, read_only=True) as conn:
        cur = await conn.execute(
            "SELECT g.player_id, p.name, max(g.score) FROM guesses g JOIN players p ON p.id = g.player_id"
            " WHERE g.round_id = %s AND g.score IS NOT NULL GROUP BY g.player_id, p.name"
            " ORDER BY max(g.score) DESC, min(g.seq) LIMIT %s", (round_id, limit))
        return [(str(i), str(n), int(s)) for i, n, s in await cur.fetchall()]


@retried
async def week_board(pool: AsyncConnectionPool, limit: int = 10) -> list[tuple[str, str, int]]:
    """Coins won in payouts this week (from Monday 00:00 UTC): (player, name, coins)."""
    async with transaction(pool, read_only=True) as conn:
        cur = await conn.execute(
            "SELECT y.player_id, p.name, sum(y.amount) FROM payouts y JOIN players p ON p.id = y.player_id"
            " WHERE y.created_at >= date_trunc('week', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'"
            " GROUP BY y.player_id, p.name ORDER BY sum(y.amount) DESC, y.player_id LIMIT %s", (limit,))
        return [(str(i), str(n), int(s)) for i, n, s in await cur.fetchall()]


@retried
async def history(pool: AsyncConnectionPool, player: str, limit: int = 5) -> list[HistoryRow]:
    """The player's last ``limit`` rounds, newest first."""
    async with transaction(pool, read_only=True) as conn:
        cur = await conn.execute(
            "SELECT r.id, r.state, r.closes_at, count(*), max(g.score),"
            " coalesce((SELECT amount FROM payouts y WHERE y.round_id = r.id AND y.player_id = %s), 0),"
            " CASE WHEN r.state = 'settled' THEN r.secret END"
            " FROM guesses g JOIN rounds r ON r.id = g.round_id WHERE g.player_id = %s"
            " GROUP BY r.id ORDER BY r.closes_at DESC LIMIT %s", (player, player, limit))
        return [HistoryRow(str(i), str(s), c, int(n), None if b is None else int(b), int(a),
                           None if x is None else tuple(x))
                for i, s, c, n, b, a, x in await cur.fetchall()]


@retried
async def player_card(pool: AsyncConnectionPool, player: str) -> dict[str, int | str] | None:
    """What an operator sees of a player: name, balance, guesses, rounds, coins granted/won."""
    async with transaction(pool, read_only=True) as conn:
        cur = await conn.execute(
            "SELECT p.name, p.balance, (SELECT count(*) FROM guesses g WHERE g.player_id = p.id),"
            " (SELECT count(DISTINCT round_id) FROM guesses g WHERE g.player_id = p.id),"
            " (SELECT coalesce(sum(l.amount), 0) FROM ledger l JOIN movements m ON m.ref = l.ref"
            "   WHERE l.account = 'player:' || p.id AND m.kind = 'grant'),"
            " (SELECT coalesce(sum(amount), 0) FROM payouts y WHERE y.player_id = p.id)"
            " FROM players p WHERE p.id = %s", (player,))
        row = await cur.fetchone()
    if row is None:
        return None
    name, bal, guesses, rounds, granted, won = row
    return {"name": str(name), "balance": int(bal), "guesses": int(guesses), "rounds": int(rounds),
            "granted": int(granted), "won": int(won)}


@retried
async def daily_topup(pool: AsyncConnectionPool, player: str,
                      amount: int) -> Granted | AlreadyApplied | UnknownPlayer:
    """Grant ``amount`` once per player per day (UTC, the database's clock)."""
    amount = checked(amount, "amount")
    async with transaction(pool) as conn:
        locked = await lock(conn, players=[player])
        if player not in locked.balances:
            return UnknownPlayer(player)
        cur = await conn.execute("SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD')")
        day = await cur.fetchone()
        assert day is not None
        ref = daily_ref(player, str(day[0]))
        if not await _move(conn, ref, "grant", amount, HOUSE, player_account(player)):
            return AlreadyApplied(ref)
        return Granted(ref, await _add_balance(conn, player, amount))


@dataclass(frozen=True, slots=True)
class GameStats:
    """The books' figures for the metrics (one snapshot)."""

    charged: int
    scored: int
    rounds: dict[str, int]
    stuck: list[tuple[str, str, float]]  # (round, state, seconds past its close)
    pot: int
    paid: int


@retried
async def game_stats(pool: AsyncConnectionPool, grace_s: int) -> GameStats:
    """Guesses charged and scored, rounds by state and the stuck ones (past their close
    plus ``grace_s``, unsettled), coins in unsettled pots, coins paid out."""
    async with transaction(pool, isolation="REPEATABLE READ", read_only=True) as conn:
        cur = await conn.execute(
            "SELECT (SELECT count(*) FROM guesses), (SELECT count(score) FROM guesses),"
            " (SELECT coalesce(sum(amount), 0) FROM payouts),"
            " (SELECT coalesce(sum(l.amount), 0) FROM ledger l JOIN rounds r ON l.account = 'round:' || r.id"
            "   WHERE r.state <> 'settled')")
        totals = await cur.fetchone()
        assert totals is not None
        cur = await conn.execute("SELECT state, count(*) FROM rounds GROUP BY state")
        rounds = {str(s): int(n) for s, n in await cur.fetchall()}
        cur = await conn.execute(
            "SELECT id, state, extract(epoch FROM now() - closes_at) FROM rounds"
            " WHERE state <> 'settled' AND closes_at < now() - make_interval(secs => %s)"
            " ORDER BY closes_at LIMIT 100", (grace_s,))
        stuck = [(str(i), str(s), float(a)) for i, s, a in await cur.fetchall()]
    charged, scored, paid, pot = (int(v) for v in totals)
    return GameStats(charged, scored, rounds, stuck, pot, paid)
