"""Money movements: charge a guess, grant coins, pay a winner. One transaction each.

Every movement inserts one ``movements`` row (its ``ref`` is the idempotency
key: a retry conflicts and applies nothing) and two ``ledger`` legs summing to
zero (checked again at commit by a deferred trigger; both tables are
append-only). Row locks are taken only by :func:`codemojex.wallet.locks.lock`:
the round first, then the players in id order, so concurrent movements and
settlements cannot deadlock. Every public call is retried on a transient
PostgreSQL failure (:mod:`codemojex.wallet.tx`) and validates its amounts
(:mod:`codemojex.wallet.amounts`) before the first write.
"""

from __future__ import annotations

from collections.abc import Sequence

from psycopg_pool import AsyncConnectionPool

from codemojex.domain.errors import ConfigurationError, Reason
from codemojex.wallet.amounts import amount as checked
from codemojex.wallet.locks import Conn, lock
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
from codemojex.wallet.tx import retried, transaction
from echomq import outbox

__all__ = [
    "HOUSE",
    "OUTBOX",
    "charge_guess",
    "charge_ref",
    "grant",
    "grant_start",
    "pay",
    "pay_locked",
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


async def _add_balance(conn: Conn, player: str, delta: int) -> int:
    cur = await conn.execute(
        "UPDATE players SET balance = balance + %s WHERE id = %s RETURNING balance", (delta, player)
    )
    row = await cur.fetchone()
    assert row is not None  # the caller holds the player's lock
    return int(row[0])


OUTBOX = outbox.OutboxTable("cm_outbox")
"""The game's outbox (migration ``0052_outbox``): a charged guess's job, written in the
charge's own transaction; echomq's relay admits it onto ``cm`` once it is committed."""


@retried
async def charge_guess(
    pool: AsyncConnectionPool,
    player: str,
    round_id: str,
    guess_id: str,
    emojis: Sequence[str],
    price: int | None = None,
    job: outbox.OutboxJob | None = None,
) -> Charged | AlreadyCharged | Insufficient | RoundRefused | UnknownPlayer:
    """Charge ``player`` for guess ``guess_id`` in ``round_id`` and record the guess.

    One transaction: lock the round (shared: one round's charges run side by
    side; a close waits for them and refuses later ones) and then the player;
    check the round (open, within its window on the *server* clock), check the
    balance, debit the player, credit the round's pot account, write the ledger
    pair with ref ``guess:<id>`` and insert the guess (``seq`` drawn from the server's
    sequence, the tie-break order). ``job``: the guess's job (its id the guess's), written
    into the game's outbox (:data:`OUTBOX`) in this same transaction, the guess stamped
    ``admitted_at`` (its admission committed): the relay puts it on the queue, so the job
    exists if and only if the charge committed. Without ``job`` the guess is left
    unadmitted (``admitted_at`` NULL) for the caller.
    ``price`` defaults to the round's ``guess_price``. A refusal changes nothing;
    a retry with the same ``guess_id`` returns :class:`AlreadyCharged`.
    """
    if price is not None:
        price = checked(price, "price")
    ref = charge_ref(guess_id)
    async with transaction(pool) as conn:
        locked = await lock(conn, round_id=round_id, round_mode="share", players=[player])
        if player not in locked.balances:
            return UnknownPlayer(player)
        balance = locked.balances[player]
        cur = await conn.execute("SELECT 1 FROM movements WHERE ref = %s", (ref,))
        if await cur.fetchone() is not None:
            return AlreadyCharged(guess_id)
        rnd = locked.round
        if rnd is None:
            return RoundRefused(round_id, Reason.NO_ROUND)
        if rnd.state != "open" or rnd.early:
            return RoundRefused(round_id, Reason.CLOSED)
        if rnd.late:
            return RoundRefused(round_id, Reason.EXPIRED)
        amount = rnd.guess_price if price is None else price
        if balance < amount:
            return Insufficient(balance, amount)
        if not await _move(conn, ref, "charge", amount, player_account(player), round_account(round_id)):
            return AlreadyCharged(guess_id)  # unreachable under the player lock; kept for safety
        new_balance = await _add_balance(conn, player, -amount)
        await conn.execute(
            "INSERT INTO guesses (id, round_id, player_id, emojis, charged, admitted_at)"
            " VALUES (%s, %s, %s, %s, %s, CASE WHEN %s THEN now() END)",
            (guess_id, round_id, player, list(emojis), amount, job is not None),
        )
        if job is not None:
            await conn.execute(OUTBOX.insert_sql(), (job.queue, job.payload, job.options_json(), job.job_id))
        return Charged(guess_id, new_balance, amount)


@retried
async def grant(
    pool: AsyncConnectionPool, player: str, amount: int, ref: str
) -> Granted | AlreadyApplied | UnknownPlayer:
    """Credit ``amount`` coins from the house to ``player``, once per ``ref``."""
    amount = checked(amount, "amount")
    async with transaction(pool) as conn:
        locked = await lock(conn, players=[player])
        if player not in locked.balances:
            return UnknownPlayer(player)
        if not await _move(conn, ref, "grant", amount, HOUSE, player_account(player)):
            return AlreadyApplied(ref)
        return Granted(ref, await _add_balance(conn, player, amount))


async def grant_start(
    pool: AsyncConnectionPool, player: str, amount: int
) -> Granted | AlreadyApplied | UnknownPlayer:
    """The starting coins: granted at most once per player (ref ``start:<player>``)."""
    return await grant(pool, player, amount, start_ref(player))


async def pay_locked(
    conn: Conn,
    round_id: str,
    player: str,
    amount: int,
    ref: str,
    guess_id: str | None = None,
) -> Paid | AlreadyPaid:
    """Pay inside the caller's transaction, which already holds (through
    :func:`~codemojex.wallet.locks.lock`) the round, not open, and the player.

    Returns :class:`AlreadyPaid` if the round paid this player before or ``ref`` exists.
    """
    amount = checked(amount, "amount")
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
    return Paid(ref, await _add_balance(conn, player, amount))


@retried
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
    and changes nothing. Paying from an open or unknown round is a programming
    error and raises ConfigurationError (the pot is fixed at close).
    """
    amount = checked(amount, "amount")
    async with transaction(pool) as conn:
        locked = await lock(conn, round_id=round_id, round_mode="update", players=[player])
        if locked.round is None or locked.round.state == "open":
            what = "unknown" if locked.round is None else "open"
            raise ConfigurationError(f"round {round_id!r} is {what}: pay after close")
        if player not in locked.balances:
            return UnknownPlayer(player)
        return await pay_locked(conn, round_id, player, amount, ref, guess_id)
