"""The read model: every query the game makes outside a money movement, in one place.

The bot (the round being played, the leaderboard), the reconciler (what to repair),
the simulation and its report (progress, the run's checks, the tables it prints),
the dashboard page and the chaos run read PostgreSQL only through these functions.
Each is one read-only statement on a pooled connection, tried once by default (a caller
that loops, such as the reconciler or a progress bar, is the retry): a transient failure
raises :class:`~codemojex.domain.errors.Unavailable`, any other ``psycopg`` error
:class:`~codemojex.domain.errors.DatabaseError`, so no ``psycopg`` exception type leaves here.
Inside :func:`retrying` (``codemojex play`` and its report run there) every read is
retried like a write, within the same bound (the wallet's retry policy, 30 s by
default): a PostgreSQL restart costs a reconnect, not the run. :func:`ping` is always
tried once (it asks whether the database answers *now*).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from datetime import datetime
from typing import Any

from psycopg_pool import AsyncConnectionPool

from codemojex.domain.payouts import Payout, ScoredGuess
from codemojex.wallet.rounds import ROUND_COLUMNS, Round, round_from_row
from codemojex.wallet.tx import RetryPolicy, current_policy, retry

__all__ = [
    "admitted_unscored",
    "count_notified",
    "count_scored",
    "count_settled",
    "current_round",
    "dashboard_payouts",
    "dashboard_rounds",
    "dashboard_totals",
    "database_now",
    "leaderboard",
    "open_round_among",
    "overdue_rounds",
    "ping",
    "player_board",
    "retrying",
    "round_guesses",
    "round_summary",
    "round_tally",
    "run_counts",
    "scored_after",
    "scored_guess_ids",
    "secret_hash",
    "stored_payouts",
]

ONCE = RetryPolicy(deadline_s=0)  # one attempt: the first transient failure is Unavailable
_reads: ContextVar[RetryPolicy] = ContextVar("codemojex_read_policy", default=ONCE)


@contextlib.contextmanager
def retrying(policy: RetryPolicy | None = None) -> Iterator[RetryPolicy]:
    """Retry every read made in this context (tasks started inside inherit it) under
    ``policy``, by default the one wallet writes use here (:func:`~.tx.retry_policy`)."""
    token = _reads.set(policy or current_policy())
    try:
        yield _reads.get()
    finally:
        _reads.reset(token)


async def _rows(pool: AsyncConnectionPool, sql: str, args: tuple[Any, ...] = (), *,
                what: str, policy: RetryPolicy | None = None) -> list[tuple[Any, ...]]:
    async def run() -> list[tuple[Any, ...]]:
        async with pool.connection(timeout=_checkout_s(pool)) as conn:
            cur = await conn.execute(sql, args)
            return list(await cur.fetchall())

    return await retry(run, what=what, policy=policy or _reads.get(), pool=pool)


def _checkout_s(pool: AsyncConnectionPool) -> float:
    """A retried read waits for a pooled connection no longer than one write attempt does."""
    return min(pool.timeout, _reads.get().checkout_s) if _reads.get() is not ONCE else pool.timeout


async def _one(pool: AsyncConnectionPool, sql: str, args: tuple[Any, ...] = (), *, what: str) -> Any:
    rows = await _rows(pool, sql, args, what=what)
    return rows[0][0] if rows else None


# ---------------------------------------------------------------- the bot
async def current_round(pool: AsyncConnectionPool) -> Round | None:
    """The open round accepting guesses now (database clock); the latest if several. One query."""
    rows = await _rows(pool, f"SELECT {ROUND_COLUMNS} FROM rounds WHERE state = 'open'"
                       " AND opens_at <= now() AND closes_at > now()"
                       " ORDER BY opens_at DESC, id DESC LIMIT 1", what="current_round")
    return round_from_row(rows[0]) if rows else None


async def leaderboard(pool: AsyncConnectionPool, limit: int = 10) -> list[tuple[str, str, int]]:
    """The ``limit`` richest players: (id, name, balance), richest first, ties by id."""
    rows = await _rows(pool, "SELECT id, name, balance FROM players ORDER BY balance DESC, id LIMIT %s",
                       (limit,), what="leaderboard")
    return [(str(i), str(n), int(b)) for i, n, b in rows]


async def secret_hash(pool: AsyncConnectionPool, rid: str) -> str | None:
    """The hash round ``rid``'s row keeps of its secret (None: no such round)."""
    value = await _one(pool, "SELECT secret_hash FROM rounds WHERE id = %s", (rid,), what="secret_hash")
    return None if value is None else str(value)


# ---------------------------------------------------------------- the reconciler
async def ping(pool: AsyncConnectionPool) -> None:
    """Does PostgreSQL answer? Raises :class:`~codemojex.domain.errors.DatabaseError` if not."""
    await _rows(pool, "SELECT 1", what="ping", policy=ONCE)


async def database_now(pool: AsyncConnectionPool) -> datetime:
    """The database clock."""
    now: datetime = await _one(pool, "SELECT now()", what="database_now")
    return now


async def admitted_unscored(pool: AsyncConnectionPool, min_age_s: float, limit: int, *,
                            after: str = "") -> list[tuple[str, str, str, tuple[str, ...]]]:
    """Guesses charged over ``min_age_s`` ago, still unscored and no longer in the game's
    outbox (the relay admitted them: a missing job was lost after its admission), with an id
    above ``after`` (a cursor: the last id of the page before), by id: (id, round, player,
    emojis). A guess still in the outbox is the relay's, not the reconciler's."""
    rows = await _rows(pool, """
        SELECT id, round_id, player_id, emojis FROM guesses g
        WHERE score IS NULL AND created_at < now() - make_interval(secs => %s)
          AND id > %s AND NOT EXISTS (SELECT 1 FROM cm_outbox o WHERE o.job_id = g.id)
        ORDER BY id LIMIT %s""", (min_age_s, after, limit), what="admitted_unscored")
    return [(str(i), str(r), str(p), tuple(e)) for i, r, p, e in rows]


async def scored_after(pool: AsyncConnectionPool, after: tuple[datetime, str], min_age_s: float,
                       limit: int) -> list[tuple[str, str, str, tuple[str, ...], int, datetime]]:
    """Guesses scored after the (scored_at, id) watermark ``after`` and over ``min_age_s`` ago:
    (id, round, player, emojis, score, scored_at), in watermark order."""
    rows = await _rows(pool, """
        SELECT id, round_id, player_id, emojis, score, scored_at FROM guesses
        WHERE (scored_at, id) > (%s, %s) AND scored_at < now() - make_interval(secs => %s)
        ORDER BY scored_at, id LIMIT %s""", (*after, min_age_s, limit), what="scored_after")
    return [(str(i), str(r), str(p), tuple(e), int(s), at) for i, r, p, e, s, at in rows]


async def overdue_rounds(pool: AsyncConnectionPool, grace_s: float, limit: int, *,
                         after: tuple[datetime, str] | None = None) -> list[tuple[str, datetime]]:
    """Rounds not settled whose closing time passed over ``grace_s`` ago, oldest first, after
    the (closes_at, id) cursor ``after``: (id, closes_at)."""
    rows = await _rows(pool, """
        SELECT id, closes_at FROM rounds
        WHERE state <> 'settled' AND closes_at < now() - make_interval(secs => %s)
          AND (%s::timestamptz IS NULL OR (closes_at, id) > (%s::timestamptz, %s))
        ORDER BY closes_at, id LIMIT %s""",
                       (grace_s, *((after[0], after[0], after[1]) if after else (None, None, "")), limit),
                       what="overdue_rounds")
    return [(str(r[0]), r[1]) for r in rows]


# ---------------------------------------------------------------- a run and its report
async def count_scored(pool: AsyncConnectionPool, round_ids: list[str]) -> int:
    return int(await _one(pool, "SELECT count(*) FROM guesses WHERE round_id = ANY(%s)"
                          " AND score IS NOT NULL", (round_ids,), what="count_scored") or 0)


async def count_settled(pool: AsyncConnectionPool, round_ids: list[str]) -> int:
    return int(await _one(pool, "SELECT count(*) FROM rounds WHERE id = ANY(%s) AND state = 'settled'",
                          (round_ids,), what="count_settled") or 0)


async def open_round_among(pool: AsyncConnectionPool, round_ids: list[str]) -> str | None:
    """The latest of ``round_ids`` that is open and not past its closing time."""
    rid = await _one(pool, "SELECT id FROM rounds WHERE id = ANY(%s) AND state = 'open' AND closes_at > now()"
                     " ORDER BY opens_at DESC LIMIT 1", (round_ids,), what="open_round_among")
    return None if rid is None else str(rid)


async def count_notified(pool: AsyncConnectionPool, round_ids: list[str]) -> int:
    """Scored guesses of ``round_ids`` whose score notification was delivered (stamped)."""
    return int(await _one(pool, "SELECT count(*) FROM guesses WHERE round_id = ANY(%s)"
                          " AND score IS NOT NULL AND notified_at IS NOT NULL", (round_ids,),
                          what="count_notified") or 0)


async def scored_guess_ids(pool: AsyncConnectionPool, round_ids: list[str]) -> list[str]:
    rows = await _rows(pool, "SELECT id FROM guesses WHERE round_id = ANY(%s) AND score IS NOT NULL",
                       (round_ids,), what="scored_guess_ids")
    return [str(r[0]) for r in rows]


async def run_counts(pool: AsyncConnectionPool,
                     round_ids: list[str]) -> tuple[int, int, int, float, float]:
    """(charged, scored, unadmitted, first charge to last admission s, first charge to last score s)."""
    (row,) = await _rows(pool, """
        SELECT count(*), count(score),
               count(*) FILTER (WHERE admitted_at IS NULL
                                OR EXISTS (SELECT 1 FROM cm_outbox o WHERE o.job_id = guesses.id)),
               coalesce(extract(epoch FROM max(admitted_at) - min(created_at)), 0),
               coalesce(extract(epoch FROM max(scored_at) - min(created_at)), 0)
        FROM guesses WHERE round_id = ANY(%s)""", (round_ids,), what="run_counts")
    return int(row[0]), int(row[1]), int(row[2]), float(row[3]), float(row[4])


async def round_tally(pool: AsyncConnectionPool, rid: str) -> tuple[str, int] | None:
    """(state, the sum charged for its guesses) of round ``rid``."""
    rows = await _rows(pool, "SELECT state, (SELECT coalesce(sum(charged), 0) FROM guesses"
                       " WHERE round_id = r.id) FROM rounds r WHERE id = %s", (rid,), what="round_tally")
    return (str(rows[0][0]), int(rows[0][1])) if rows else None


async def round_guesses(pool: AsyncConnectionPool, rid: str) -> list[ScoredGuess]:
    """Every guess of a settled round (all scored), in no particular order."""
    rows = await _rows(pool, "SELECT id, player_id, score, seq FROM guesses WHERE round_id = %s", (rid,),
                       what="round_guesses")
    return [ScoredGuess(str(i), str(p), int(s), int(q)) for i, p, s, q in rows]


async def stored_payouts(pool: AsyncConnectionPool, rid: str) -> tuple[Payout, ...]:
    rows = await _rows(pool, "SELECT player_id, amount, guess_id FROM payouts WHERE round_id = %s"
                       " ORDER BY player_id", (rid,), what="stored_payouts")
    return tuple(Payout(str(p), int(a), str(g)) for p, a, g in rows)


async def player_board(pool: AsyncConnectionPool, players: list[str],
                       limit: int = 10) -> list[tuple[str, int, int, int, int]]:
    """The richest of ``players``: (id, balance, won, guesses, best score)."""
    rows = await _rows(pool, """
        SELECT p.id, p.balance,
               coalesce((SELECT sum(amount) FROM payouts WHERE player_id = p.id), 0),
               (SELECT count(*) FROM guesses WHERE player_id = p.id),
               coalesce((SELECT max(score) FROM guesses WHERE player_id = p.id), 0)
        FROM players p WHERE p.id = ANY(%s) ORDER BY p.balance DESC, p.id LIMIT %s""",
                       (players, limit), what="player_board")
    return [(str(i), int(b), int(w), int(c), int(s)) for i, b, w, c, s in rows]


async def round_summary(pool: AsyncConnectionPool, rid: str) -> tuple[int, int, int, int, int]:
    """(guesses, pot charged, winners, paid, top payout) of round ``rid``."""
    (row,) = await _rows(pool, """
        SELECT (SELECT count(*) FROM guesses WHERE round_id = %s),
               (SELECT coalesce(sum(charged), 0) FROM guesses WHERE round_id = %s),
               count(*), coalesce(sum(amount), 0), coalesce(max(amount), 0)
        FROM payouts WHERE round_id = %s""", (rid, rid, rid), what="round_summary")
    return int(row[0]), int(row[1]), int(row[2]), int(row[3]), int(row[4])


# ---------------------------------------------------------------- the dashboard page
_ROUNDS = """
SELECT r.id, r.emoji_set, r.state, r.opens_at, r.closes_at, r.settled_at, r.guess_price,
       (SELECT coalesce(sum(g.charged), 0) FROM guesses g WHERE g.round_id = r.id),
       (SELECT count(*) FROM guesses g WHERE g.round_id = r.id),
       (SELECT count(*) FROM guesses g WHERE g.round_id = r.id AND g.score IS NOT NULL),
       (SELECT coalesce(sum(amount), 0) FROM payouts p WHERE p.round_id = r.id),
       (SELECT count(*) FROM payouts p WHERE p.round_id = r.id)
FROM rounds r WHERE {where} ORDER BY {order} LIMIT %s
"""


async def dashboard_rounds(pool: AsyncConnectionPool, *, settled: bool, limit: int) -> list[tuple[Any, ...]]:
    """Rounds not settled (latest opened first) or settled (latest settled first), with their figures."""
    sql = (_ROUNDS.format(where="r.state = 'settled'", order="r.settled_at DESC NULLS LAST") if settled
           else _ROUNDS.format(where="r.state <> 'settled'", order="r.opens_at DESC"))
    return await _rows(pool, sql, (limit,), what="dashboard_rounds")


async def dashboard_payouts(pool: AsyncConnectionPool, limit: int) -> list[tuple[Any, ...]]:
    """The latest payouts: (round, player, name, amount, at)."""
    return await _rows(pool, """
        SELECT p.round_id, p.player_id, pl.name, p.amount, p.created_at
        FROM payouts p JOIN players pl ON pl.id = p.player_id
        ORDER BY p.created_at DESC, p.round_id LIMIT %s""", (limit,), what="dashboard_payouts")


async def dashboard_totals(pool: AsyncConnectionPool) -> tuple[Any, ...]:
    """(players, rounds not settled, rounds settled, coins in open pots, coins paid, now ms)."""
    (row,) = await _rows(pool, """
        SELECT (SELECT count(*) FROM players), (SELECT count(*) FROM rounds WHERE state <> 'settled'),
               (SELECT count(*) FROM rounds WHERE state = 'settled'),
               (SELECT coalesce(sum(l.amount), 0) FROM ledger l JOIN rounds r ON l.account = 'round:' || r.id
                WHERE r.state <> 'settled'),
               (SELECT coalesce(sum(amount), 0) FROM payouts),
               extract(epoch FROM now()) * 1000""", what="dashboard_totals")
    return row
