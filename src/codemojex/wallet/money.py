"""Money movements: charge a guess, grant coins, pay a winner. One transaction each.

Every movement inserts one ``movements`` row (its ``ref`` is the idempotency
key: a retry conflicts and applies nothing) and two ``ledger`` legs summing to
zero (checked again at commit by a deferred trigger). Row locks are always
taken player first, then round, so concurrent movements cannot deadlock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from codemojex.errors import Reason
from codemojex.wallet.results import (
    AlreadyApplied,
    AlreadyCharged,
    AlreadyPaid,
    Charged,
    Granted,
    Insufficient,
    Paid,
    RoundRefused,
    UnknownPlayer,
)

Conn = AsyncConnection[tuple[Any, ...]]

__all__ = [
    "HOUSE",
    "charge_guess",
    "charge_ref",
    "grant",
    "grant_start",
    "pay",
    "pay_on",
    "player_account",
    "round_account",
    "start_ref",
]

HOUSE = "house"


def player_account(player: str) -> str:
    return f"player:{player}"


def round_account(round_id: str) -> str:
    return f"round:{round_id}"


def charge_ref(guess_id: str) -> str:
    return f"guess:{guess_id}"


def start_ref(player: str) -> str:
    return f"start:{player}"


def _positive(amount: int, what: str) -> None:
    if isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0:
        raise ValueError(f"{what} must be a positive integer, got {amount!r}")


async def _move(conn: Conn, ref: str, kind: str, amount: int, debit: str, credit: str) -> bool:
    """Record a movement of ``amount`` from ``debit`` to ``credit``; False if ``ref`` exists."""
    cur = await conn.execute(
        "INSERT INTO movements (ref, kind, amount) VALUES (%s, %s, %s)"
        " ON CONFLICT (ref) DO NOTHING RETURNING ref",
        (ref, kind, amount),
    )
    if await cur.fetchone() is None:
        return False
    await conn.execute(
        "INSERT INTO ledger (ref, account, amount) VALUES (%s, %s, %s), (%s, %s, %s)",
        (ref, debit, -amount, ref, credit, amount),
    )
    return True


async def _lock_player(conn: Conn, player: str) -> int | None:
    cur = await conn.execute("SELECT balance FROM players WHERE id = %s FOR UPDATE", (player,))
    row = await cur.fetchone()
    return None if row is None else int(row[0])


async def charge_guess(
    pool: AsyncConnectionPool,
    player: str,
    round_id: str,
    guess_id: str,
    emojis: Sequence[str],
    price: int | None = None,
) -> Charged | AlreadyCharged | Insufficient | RoundRefused | UnknownPlayer:
    """Charge ``player`` for guess ``guess_id`` in ``round_id`` and record the guess.

    One transaction: ``SELECT … FOR UPDATE`` the player row, check the round
    (open, within its window on the *server* clock), check the balance, debit
    the player, credit the round's pot account, write the ledger pair with ref
    ``guess:<id>`` and insert the guess (``admitted_at`` NULL, for the relay).
    ``price`` defaults to the round's ``guess_price``. A refusal changes nothing;
    a retry with the same ``guess_id`` returns :class:`AlreadyCharged`. The round row
    is only share-locked, so one round's charges do not queue behind each other; the
    ``rounds.pot`` column is written when the round closes (the sum of its ledger legs).
    """
    if price is not None:
        _positive(price, "price")
    ref = charge_ref(guess_id)
    outcome: Charged | AlreadyCharged | Insufficient | RoundRefused | UnknownPlayer
    async with pool.connection() as conn, conn.transaction():
        balance = await _lock_player(conn, player)
        if balance is None:
            return UnknownPlayer(player)
        cur = await conn.execute("SELECT 1 FROM movements WHERE ref = %s", (ref,))
        if await cur.fetchone() is not None:
            return AlreadyCharged(guess_id)
        cur = await conn.execute(
            # FOR SHARE: charges of one round run side by side; closing the round takes
            # FOR UPDATE, so it waits for the charges in flight and refuses later ones.
            "SELECT state, now() < opens_at, now() >= closes_at, guess_price"
            " FROM rounds WHERE id = %s FOR SHARE",
            (round_id,),
        )
        rnd = await cur.fetchone()
        if rnd is None:
            return RoundRefused(round_id, Reason.NO_ROUND)
        state, early, late, round_price = rnd
        if state != "open" or early:
            return RoundRefused(round_id, Reason.CLOSED)
        if late:
            return RoundRefused(round_id, Reason.EXPIRED)
        amount = int(round_price) if price is None else price
        if balance < amount:
            return Insufficient(balance, amount)
        if not await _move(conn, ref, "charge", amount, player_account(player), round_account(round_id)):
            return AlreadyCharged(guess_id)  # unreachable under the player lock; kept for safety
        cur = await conn.execute(
            "UPDATE players SET balance = balance - %s WHERE id = %s RETURNING balance",
            (amount, player),
        )
        row = await cur.fetchone()
        assert row is not None
        await conn.execute(
            "INSERT INTO guesses (id, round_id, player_id, emojis, charged) VALUES (%s, %s, %s, %s, %s)",
            (guess_id, round_id, player, list(emojis), amount),
        )
        outcome = Charged(guess_id, int(row[0]), amount)
    return outcome


async def grant(
    pool: AsyncConnectionPool, player: str, amount: int, ref: str
) -> Granted | AlreadyApplied | UnknownPlayer:
    """Credit ``amount`` coins from the house to ``player``, once per ``ref``."""
    _positive(amount, "amount")
    async with pool.connection() as conn, conn.transaction():
        if await _lock_player(conn, player) is None:
            return UnknownPlayer(player)
        if not await _move(conn, ref, "grant", amount, HOUSE, player_account(player)):
            return AlreadyApplied(ref)
        cur = await conn.execute(
            "UPDATE players SET balance = balance + %s WHERE id = %s RETURNING balance",
            (amount, player),
        )
        row = await cur.fetchone()
        assert row is not None
        return Granted(ref, int(row[0]))


async def grant_start(
    pool: AsyncConnectionPool, player: str, amount: int
) -> Granted | AlreadyApplied | UnknownPlayer:
    """The starting coins: granted at most once per player (ref ``start:<player>``)."""
    return await grant(pool, player, amount, start_ref(player))


async def pay_on(
    conn: Conn,
    round_id: str,
    player: str,
    amount: int,
    ref: str,
    guess_id: str | None = None,
) -> Paid | AlreadyPaid | UnknownPlayer:
    """:func:`pay` inside the caller's open transaction (settlement pays many in one).

    Pays only from a round that is no longer open (its pot is fixed at close);
    paying from an open round is a programming error and raises ValueError.
    """
    _positive(amount, "amount")
    if await _lock_player(conn, player) is None:
        return UnknownPlayer(player)
    cur = await conn.execute("SELECT state FROM rounds WHERE id = %s FOR UPDATE", (round_id,))
    if (state := await cur.fetchone()) is None or state[0] == "open":
        raise ValueError(f"round {round_id!r} is {'open' if state else 'unknown'}: pay after close")
    # Under the player lock no other payout to this player can interleave.
    cur = await conn.execute(
        "SELECT ref FROM payouts WHERE round_id = %s AND player_id = %s", (round_id, player)
    )
    if (row := await cur.fetchone()) is not None:
        return AlreadyPaid(str(row[0]))
    if not await _move(conn, ref, "payout", amount, round_account(round_id), player_account(player)):
        return AlreadyPaid(ref)
    await conn.execute(
        "INSERT INTO payouts (round_id, player_id, amount, guess_id, ref) VALUES (%s, %s, %s, %s, %s)",
        (round_id, player, amount, guess_id, ref),
    )
    # The round's pot cannot go negative (CHECK): paying more than the pot raises.
    await conn.execute("UPDATE rounds SET pot = pot - %s WHERE id = %s", (amount, round_id))
    cur = await conn.execute(
        "UPDATE players SET balance = balance + %s WHERE id = %s RETURNING balance",
        (amount, player),
    )
    row = await cur.fetchone()
    assert row is not None
    return Paid(ref, int(row[0]))


async def pay(
    pool: AsyncConnectionPool,
    round_id: str,
    player: str,
    amount: int,
    ref: str,
    guess_id: str | None = None,
) -> Paid | AlreadyPaid | UnknownPlayer:
    """Pay ``amount`` from the round's pot to ``player``, once.

    Idempotent twice over: a second call with the same ``ref``, or any second
    payout of the same round to the same player, returns :class:`AlreadyPaid`
    and changes nothing.
    """
    async with pool.connection() as conn, conn.transaction():
        return await pay_on(conn, round_id, player, amount, ref, guess_id)
