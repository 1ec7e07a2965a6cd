"""The wallet's writes for many guesses in one transaction each: charges, scores, marks.

Each is the batch form of a one-guess call and keeps its guarantees item by item:

* :func:`charge_guesses` is :func:`~codemojex.wallet.money.charge_guess` for guesses of one
  round: the round locked in share mode and then every player of the batch in id order (the
  wallet's one lock order, :mod:`codemojex.wallet.locks`), each guess checked and charged in
  its order against its player's running balance, refused alone (insufficient, a repeat of
  its ref: :class:`AlreadyCharged`), every charged one written with multi-row statements
  (movements, ledger pairs, balances, guess rows, outbox rows). The player's locked
  positions are read in the same transaction and overlaid on the guess (``Locks.merge``).
* :func:`record_scores` is :func:`~codemojex.wallet.rounds.record_score` for many guesses:
  each score stored once (``WHERE score IS NULL``), the exact positions locked, and the
  guesses' outbox rows deleted (a guess being scored was admitted: the relay need not).
* :func:`mark_notified_many` stamps delivered score notes (the first stamp counts).
* :func:`untold_scores` reads, for many (player, round) pairs at once, the scores not told yet
  (scored, not stamped): what a player's coalesced score note says when it is delivered
  (docs/decisions/0049-score-notes-per-player-round.md); :func:`scored_untold_after` is the
  reconciler's page of scored guesses with whether each is told.

Statement count per batch is fixed (a handful), whatever its size: that is what makes a
guess cheap for PostgreSQL (docs/capacity.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from psycopg_pool import AsyncConnectionPool

from codemojex.domain import Guess, merge
from codemojex.domain.errors import Reason
from codemojex.wallet.locks import Conn, lock
from codemojex.wallet.money import OUTBOX, charge_ref, player_account, round_account
from codemojex.wallet.results import (
    AlreadyCharged,
    AlreadyScored,
    Charged,
    Insufficient,
    RoundRefused,
    Scored,
    UnknownGuess,
    UnknownPlayer,
)
from codemojex.wallet.tx import retried, transaction
from echomq import outbox

__all__ = ["ChargeItem", "ChargeOutcome", "Untold", "charge_guesses", "mark_notified_many", "record_scores",
           "scored_untold_after", "untold_scores"]

ChargeOutcome = Charged | AlreadyCharged | Insufficient | RoundRefused | UnknownPlayer


@dataclass(frozen=True, slots=True)
class ChargeItem:
    """One guess to charge: its player, its id (the ref and the job id) and the parsed guess
    (the player's locks are overlaid on it inside the charge)."""

    player: str
    guess_id: str
    guess: Guess


@retried
async def charge_guesses(
    pool: AsyncConnectionPool,
    round_id: str,
    items: Sequence[ChargeItem],
    job_of: Callable[[ChargeItem, Guess], outbox.OutboxJob] | None = None,
) -> list[tuple[ChargeOutcome, Guess]]:
    """Charge every item in one transaction (module docstring); per item its outcome and the
    guess as charged (locks overlaid). ``job_of``: the outbox row of a charged guess (see
    :func:`~codemojex.wallet.money.charge_guess`'s ``job``); the guess is stamped admitted."""
    async with transaction(pool, pipelined=True) as conn:
        # Pipeline mode: BEGIN and the reads go out together (one round trip), the writes
        # and the COMMIT together (one more), whatever the batch's size.
        return await _charge(conn, round_id, items, job_of)


async def _charge(conn: Conn, round_id: str, items: Sequence[ChargeItem],
                  job_of: Callable[[ChargeItem, Guess], outbox.OutboxJob] | None
                  ) -> list[tuple[ChargeOutcome, Guess]]:
    players = sorted({i.player for i in items})
    locked = await lock(conn, round_id=round_id, round_mode="share", players=players)
    refs = [charge_ref(i.guess_id) for i in items]
    refs_cur = await conn.execute("SELECT ref FROM movements WHERE ref = ANY(%b::text[])", (refs,))
    locks_cur = await conn.execute("SELECT player_id, position, emoji FROM locks WHERE round_id = %s"
                                   " AND player_id = ANY(%b::text[])", (round_id, players))
    taken = {str(r[0]) for r in await refs_cur.fetchall()}
    locks: dict[str, dict[int, str]] = {}
    for pid, pos, emoji in await locks_cur.fetchall():
        locks.setdefault(str(pid), {})[int(pos)] = str(emoji)
    rnd = locked.round
    balances = dict(locked.balances)
    out: list[tuple[ChargeOutcome, Guess]] = []
    charged: list[tuple[ChargeItem, Guess, int]] = []
    for item, ref in zip(items, refs, strict=True):
        emojis = merge(locks.get(item.player, {}), item.guess)
        result: ChargeOutcome
        if item.player not in balances:
            result = UnknownPlayer(item.player)
        elif ref in taken:
            result = AlreadyCharged(item.guess_id)
        elif rnd is None:
            result = RoundRefused(round_id, Reason.NO_ROUND)
        elif rnd.state != "open" or rnd.early:
            result = RoundRefused(round_id, Reason.CLOSED)
        elif rnd.late:
            result = RoundRefused(round_id, Reason.EXPIRED)
        elif balances[item.player] < rnd.guess_price:
            result = Insufficient(balances[item.player], rnd.guess_price)
        else:
            taken.add(ref)  # the same id twice in one batch: the second is a repeat
            balances[item.player] -= rnd.guess_price
            result = Charged(item.guess_id, balances[item.player], rnd.guess_price)
            charged.append((item, emojis, rnd.guess_price))
        out.append((result, emojis))
    if charged:
        await _write(conn, round_id, charged, balances, locked.balances, job_of)
    return out


_SEP = "\x1f"  # joins a guess's emojis into one array element (no emoji contains it)


async def _write(conn: Conn, round_id: str, charged: list[tuple[ChargeItem, Guess, int]],
                 balances: Mapping[str, int], before: Mapping[str, int],
                 job_of: Callable[[ChargeItem, Guess], outbox.OutboxJob] | None) -> None:
    # One statement (data-modifying CTEs) takes the batch's columns as arrays (unnest) once
    # and writes the movements, their ledger pairs, the guesses and their outbox rows: one
    # fixed text, parsed and prepared once, whatever the batch's size. The foreign keys
    # (ledger -> movements) are checked at the statement's end, the ledger's balance at
    # commit (deferred). A ref and an account are built in SQL from their prefixes
    # (charge_ref(""), player_account("")), so each guess sends its id and player once.
    # The arrays go in binary (%b): psycopg's text array dumper quotes each element in
    # Python (~1.2 µs a string against ~0.2 µs in binary).
    prices = {price for _, _, price in charged}
    if len(prices) != 1:  # one round, one price: _charge charges every item at rnd.guess_price
        raise ValueError(f"a charge batch of one round has one price, not {sorted(prices)}")
    ids = [item.guess_id for item, _, _ in charged]
    players = [item.player for item, _, _ in charged]
    emojis = [_SEP.join(e) for _, e, _ in charged]
    moved = {p: balances[p] - before[p] for p in balances if balances[p] != before[p]}
    params: list[object] = [ids, players, emojis, charge_ref(""), prices.pop(), player_account(""),
                            round_account(round_id), list(moved), list(moved.values()), round_id, _SEP,
                            job_of is not None]
    sql = _CHARGE_SQL
    if job_of is not None:
        jobs = [job_of(item, e) for item, e, _ in charged]
        sql = _CHARGE_OUTBOX_SQL
        params += [[j.queue for j in jobs], [j.payload for j in jobs], [j.options_json() for j in jobs],
                   [j.job_id for j in jobs]]
    await conn.execute(sql, params)


_CHARGE_SQL = (
    "WITH n AS (SELECT * FROM unnest(%b::text[], %b::text[], %b::text[]) WITH ORDINALITY AS n(g, p, e, i)),"
    " c AS (SELECT %s::text AS ref, %s::bigint AS price, %s::text AS account, %s::text AS pot),"
    " mv AS (INSERT INTO movements (ref, kind, amount)"
    "  SELECT c.ref || n.g, 'charge', c.price FROM n, c ORDER BY n.i),"
    " lg AS (INSERT INTO ledger (ref, account, amount)"
    "  SELECT c.ref || n.g, l.account, l.amount FROM n, c,"
    "  LATERAL (VALUES (c.account || n.p, -c.price), (c.pot, c.price)) AS l(account, amount) ORDER BY n.i),"
    " pl AS (UPDATE players SET balance = balance + d.delta FROM unnest(%b::text[], %b::bigint[])"
    "  AS d(id, delta) WHERE players.id = d.id),"
    " gs AS (INSERT INTO guesses (id, round_id, player_id, emojis, charged, admitted_at)"
    "  SELECT n.g, %s, n.p, string_to_array(n.e, %s), c.price, CASE WHEN %s THEN now() END FROM n, c"
    "  ORDER BY n.i)"
)
_CHARGE_OUTBOX_SQL = (
    _CHARGE_SQL + f" INSERT INTO {OUTBOX.quoted} (queue, payload, options, job_id)"
    " SELECT q, b, o::jsonb, j FROM unnest(%b::text[], %b::bytea[], %b::text[], %b::text[]) AS x(q, b, o, j)"
)
_CHARGE_SQL += " SELECT 1"


@retried
async def record_scores(
    pool: AsyncConnectionPool, scores: Sequence[tuple[str, int, Mapping[int, str]]]
) -> list[Scored | AlreadyScored | UnknownGuess]:
    """``(guess id, score, exact positions)`` each stored once, in one transaction (see
    :func:`~codemojex.wallet.rounds.record_score`: no money lock is taken)."""
    ids = [g for g, _, _ in scores]
    exact = [(g, pos, emoji) for g, _, positions in scores for pos, emoji in positions.items()]
    async with transaction(pool, pipelined=True) as conn:
        # One statement: each score stored once (only a NULL score is set); the outbox rows
        # of the guesses scored now deleted (a scored guess's job was admitted: the relay
        # never admits it a second time); their exact positions become the player's locks,
        # inserted in (round, player, position) order like every lock writer.
        cur = await conn.execute(
            "WITH s AS (SELECT * FROM unnest(%b::text[], %b::int[]) AS s(id, score)),"
            " upd AS (UPDATE guesses SET score = s.score, scored_at = now() FROM s"
            "  WHERE guesses.id = s.id AND guesses.score IS NULL"
            "  RETURNING guesses.id, guesses.round_id, guesses.player_id),"
            f" del AS (DELETE FROM {OUTBOX.quoted} WHERE job_id IN (SELECT id FROM upd)),"
            " lk AS (INSERT INTO locks (round_id, player_id, position, emoji)"
            "  SELECT DISTINCT u.round_id, u.player_id, x.pos, x.emoji FROM upd u"
            "  JOIN unnest(%b::text[], %b::smallint[], %b::text[]) AS x(g, pos, emoji) ON x.g = u.id"
            "  ORDER BY 1, 2, 3 ON CONFLICT DO NOTHING)"
            " SELECT id, round_id, player_id FROM upd",
            (ids, [s for _, s, _ in scores], [g for g, _, _ in exact], [p for _, p, _ in exact],
             [e for _, _, e in exact]))
        fresh = {str(i): (str(r), str(p)) for i, r, p in await cur.fetchall()}
        old: dict[str, int] = {}
        if len(fresh) < len(set(ids)):
            cur = await conn.execute(
                "SELECT id, score FROM guesses WHERE id = ANY(%b::text[]) AND score IS NOT NULL",
                ([g for g in ids if g not in fresh],))
            old = {str(i): int(s) for i, s in await cur.fetchall()}
    out: list[Scored | AlreadyScored | UnknownGuess] = []
    first: set[str] = set()
    for g, s, _ in scores:
        if g in fresh and g not in first:
            first.add(g)
            out.append(Scored(g, s))
        elif g in fresh:  # the same guess twice in one batch: the first stored it
            out.append(AlreadyScored(g, next(x for y, x, _ in scores if y == g)))
        elif g in old:
            out.append(AlreadyScored(g, old[g]))
        else:
            out.append(UnknownGuess(g))
    return out


@retried
async def mark_notified_many(pool: AsyncConnectionPool, guess_ids: Sequence[str]) -> int:
    """Stamp the delivery of each guess's score notification (the first stamp counts);
    how many this call stamped."""
    async with transaction(pool, pipelined=True) as conn:
        cur = await conn.execute("UPDATE guesses SET notified_at = now() WHERE id = ANY(%b::text[])"
                                 " AND notified_at IS NULL", (list(guess_ids),))
        return cur.rowcount


@dataclass(frozen=True, slots=True)
class Untold:
    """A scored guess whose score is not told yet: its id, its emojis (locks overlaid) and score."""

    guess_id: str
    emojis: tuple[str, ...]
    score: int


@retried
async def untold_scores(pool: AsyncConnectionPool,
                        pairs: Sequence[tuple[str, str]]) -> list[list[Untold]]:
    """For each ``(player, round)`` of ``pairs``, its scored guesses not stamped told yet, in
    the order they were charged: one statement for all the pairs (``guesses_round_player``)."""
    async with transaction(pool, pipelined=True) as conn:
        cur = await conn.execute(
            "SELECT n.i, g.id, g.emojis, g.score"
            " FROM unnest(%b::text[], %b::text[]) WITH ORDINALITY AS n(p, r, i)"
            " JOIN guesses g ON g.round_id = n.r AND g.player_id = n.p"
            " WHERE g.score IS NOT NULL AND g.notified_at IS NULL ORDER BY n.i, g.seq",
            ([p for p, _ in pairs], [r for _, r in pairs]))
        rows = await cur.fetchall()
    out: list[list[Untold]] = [[] for _ in pairs]
    for i, gid, emojis, total in rows:
        out[int(i) - 1].append(Untold(str(gid), tuple(emojis), int(total)))
    return out


@retried
async def scored_untold_after(pool: AsyncConnectionPool, after: tuple[datetime, str], min_age_s: float,
                              limit: int) -> list[tuple[str, str, str, datetime, bool]]:
    """Guesses scored after the (scored_at, id) watermark ``after`` and over ``min_age_s`` ago,
    in watermark order: (id, round, player, scored_at, told yet)."""
    async with transaction(pool) as conn:
        cur = await conn.execute(
            "SELECT id, round_id, player_id, scored_at, notified_at IS NOT NULL FROM guesses"
            " WHERE (scored_at, id) > (%s, %s) AND scored_at < now() - make_interval(secs => %s)"
            " ORDER BY scored_at, id LIMIT %s", (*after, min_age_s, limit))
        rows = await cur.fetchall()
    return [(str(i), str(r), str(p), at, bool(told)) for i, r, p, at, told in rows]
