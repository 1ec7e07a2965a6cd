"""The audit: each check fires on the corruption it names (injected into a fresh copy of a
healthy, settled world), and the ledger is append-only in the database."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from codemojex.domain import CLASSIC
from codemojex.infra.pg import open_pool
from codemojex.wallet import (
    CHECKS,
    DEFAULT_GRACE,
    Audit,
    audit,
    audit_on,
    charge_guess,
    close_round,
    create_round,
    ensure_player,
    grant_start,
    migrate,
    record_score,
    settle_round,
)

GUESS = ("😀", "😎", "🤖", "👻", "🐱", "🐶")
NOW = datetime.now(UTC)


async def _build(url: str) -> None:
    """Two players, a settled round R1 (A and B paid), an open round R2 with one charge."""
    pool = await open_pool(url, max_size=2)
    try:
        await migrate(pool)
        for p in ("A", "B"):
            await ensure_player(pool, p)
            await grant_start(pool, p, 100)
        for rid in ("R1", "R2", "R3"):
            await create_round(pool, rid, emoji_set=CLASSIC.id, secret=GUESS,
                               opens_at=NOW - timedelta(hours=1),
                               closes_at=NOW + timedelta(hours=1), guess_price=7)
        for gid, p, s in (("G1", "A", 300), ("G2", "B", 100)):
            await charge_guess(pool, p, "R1", gid, GUESS)
            await record_score(pool, gid, s)
        await close_round(pool, "R1")
        assert isinstance(await settle_round(pool, "R1"), tuple)
        await charge_guess(pool, "A", "R2", "G3", GUESS)
        assert (await audit(pool)).ok
    finally:
        await pool.close()


@pytest.fixture(scope="module")
def world(db_url: str) -> str:
    """The module's database holding the healthy world; every test rolls its changes back."""
    asyncio.run(_build(db_url))
    return db_url


async def _audit_after(url: str, statements: list[str], grace: timedelta = DEFAULT_GRACE) -> Audit:
    """Inject ``statements``, audit in the same transaction, roll everything back."""
    async with await psycopg.AsyncConnection.connect(url) as conn:
        try:
            for stmt in statements:
                await conn.execute(stmt.encode())
            return await audit_on(conn, grace=grace)
        finally:
            await conn.rollback()


# Raw writes that bypass the wallet. "replica" turns off triggers and foreign keys for the
# session (the corruption a bad restore or a hand edit leaves); CHECKs still hold.
REPLICA = "SET LOCAL session_replication_role = replica"
CORRUPTIONS: dict[str, list[str]] = {
    "ledger_sum": [REPLICA, "INSERT INTO movements VALUES ('x', 'payout', 5)",
                   "INSERT INTO ledger (ref, account, amount) VALUES ('x', 'round:R2', -5)"],
    "unbalanced_refs": [REPLICA, "INSERT INTO movements VALUES ('x', 'payout', 5)",
                        "INSERT INTO ledger (ref, account, amount) VALUES ('x', 'round:R2', -5),"
                        " ('x', 'round:R3', 4)"],
    "movements_without_lines": ["INSERT INTO movements VALUES ('x', 'payout', 5)"],
    # The probe: a movement of 5 whose lines move 999, to a round that does not exist.
    "lines_disagree": ["INSERT INTO movements VALUES ('x', 'payout', 5)",
                       "INSERT INTO ledger (ref, account, amount) VALUES ('x', 'round:R2', -999),"
                       " ('x', 'round:NOPE', 999)"],
    "lines_without_movement": [REPLICA, "INSERT INTO ledger (ref, account, amount) VALUES"
                               " ('ghost', 'round:R2', -1), ('ghost', 'round:R3', 1)"],
    "unknown_accounts": ["INSERT INTO movements VALUES ('x', 'payout', 5)",
                         "INSERT INTO ledger (ref, account, amount) VALUES ('x', 'round:R2', -5),"
                         " ('x', 'round:NOPE', 5)"],
    "dangling_references": [REPLICA, "INSERT INTO locks VALUES ('R2', 'GHOST', 0, '😀')"],
    "negative_balances": ["ALTER TABLE players DROP CONSTRAINT players_non_negative",
                          "INSERT INTO players (id, balance) VALUES ('C', -1)"],
    "balance_mismatches": ["UPDATE players SET balance = balance + 1 WHERE id = 'B'"],
    "pot_mismatches": ["UPDATE rounds SET pot = pot + 1 WHERE id = 'R1'"],
    "charge_mismatches": ["UPDATE guesses SET charged = charged + 1 WHERE id = 'G3'"],
    "unsettled_scores": ["UPDATE guesses SET score = NULL, scored_at = NULL WHERE id = 'G2'"],
    "stuck_rounds": ["INSERT INTO rounds (id, emoji_set, secret, opens_at, closes_at, guess_price)"
                     " VALUES ('OLD', 'classic', '{a,b,c,d,e,f}', now() - interval '2 hours',"
                     " now() - interval '1 hour', 5)"],
    "house_mismatch": ["INSERT INTO movements VALUES ('x', 'payout', 5)",
                       "INSERT INTO ledger (ref, account, amount) VALUES ('x', 'house', -5),"
                       " ('x', 'round:R2', 5)"],
    "coins_unaccounted": ["DELETE FROM payouts WHERE player_id = 'B'"],
    "payout_pot_mismatches": ["UPDATE payouts SET amount = amount + 1 WHERE player_id = 'A'"],
    "duplicate_payouts": ["INSERT INTO movements VALUES ('payout:R1:A:again', 'payout', 1)",
                          "INSERT INTO ledger (ref, account, amount) VALUES"
                          " ('payout:R1:A:again', 'round:R1', -1), ('payout:R1:A:again', 'player:A', 1)"],
}


def test_every_check_has_a_corruption_test() -> None:
    assert set(CORRUPTIONS) == set(CHECKS)


async def test_the_healthy_world_is_clean(world: str) -> None:
    assert (await _audit_after(world, [])).failures == {}


@pytest.mark.parametrize("check", sorted(CORRUPTIONS))
async def test_the_check_flags_its_corruption(world: str, check: str) -> None:
    found = await _audit_after(world, CORRUPTIONS[check])
    assert not found.ok
    assert found.failures.get(check, 0) != 0, found.failures


async def test_stuck_rounds_respects_the_grace(world: str) -> None:
    late = ["INSERT INTO rounds (id, emoji_set, secret, opens_at, closes_at, guess_price) VALUES"
            " ('LATE', 'classic', '{a,b,c,d,e,f}', now() - interval '2 minutes', now() - interval '30 s', 5)"]
    assert (await _audit_after(world, late, grace=timedelta(minutes=1))).ok
    assert (await _audit_after(world, late, grace=timedelta(seconds=1))).failures == {"stuck_rounds": 1}


@pytest.mark.parametrize("stmt", [
    "DELETE FROM ledger WHERE ref = 'start:A'",
    "UPDATE ledger SET amount = amount * 2 WHERE ref = 'start:A'",
    "TRUNCATE ledger CASCADE",
    "DELETE FROM movements WHERE ref = 'guess:G3'",
    "UPDATE movements SET amount = 1 WHERE ref = 'guess:G3'",
])
async def test_the_ledger_is_append_only(world: str, stmt: str) -> None:
    async with await psycopg.AsyncConnection.connect(world) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
            await conn.execute(stmt.encode())
        await conn.rollback()
        cur = await conn.execute("SELECT count(*) FROM ledger WHERE ref IN ('start:A', 'guess:G3')")
        assert await cur.fetchone() == (4,)

