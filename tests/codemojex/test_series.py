"""One series of rounds, whatever happens (issue 25, item 2): the series lives in PostgreSQL,
a start resumes it, and no late, lost or repeated open job makes two rounds open at once."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from codemojex.domain.errors import InvalidSetting
from codemojex.game.app import App
from codemojex.service import (
    RoundPlan,
    SeriesSettings,
    Services,
    kick,
    pause_series,
    resume_series,
    round_id,
    series_status,
    start_series,
)
from codemojex.service.codec import OpenRound
from codemojex.service.rounds import open_job_id, open_round
from codemojex.service.series import ensure_rounds
from codemojex.wallet import get_round
from codemojex.wallet.series import NotYet, get_series, live_series
from tests.codemojex.game import eventually


def _name(services: Services) -> str:
    return f"series{services.suffix}"  # a series name of this test's own


async def _rounds_of(services: Services, sid: str) -> list[tuple[int, str]]:
    async with services.pool.connection() as conn:
        cur = await conn.execute("SELECT series_index, state FROM rounds WHERE series_id = %s"
                                 " ORDER BY series_index", (sid,))
        return [(int(i), str(s)) for i, s in await cur.fetchall()]


@pytest.mark.parametrize(("field", "value"), [
    ("round_ms", 0), ("round_ms", 1.5), ("round_ms", True), ("round_ms", 10**12),
    ("price", 0), ("price", "10"), ("price", 10**13), ("rounds", 0), ("rounds", 2.0),
    ("start_grant", -1), ("daily_topup", -5), ("daily_topup", None), ("gap_ms", -1),
    ("emoji_set", "nope"),
])
def test_a_setting_out_of_range_is_a_typed_error_naming_it(field: str, value: Any) -> None:
    with pytest.raises(InvalidSetting) as caught:
        SeriesSettings(**{field: value})
    assert caught.value.name == field and field in str(caught.value)


def test_unlimited_rounds_and_zero_grants_are_settings() -> None:
    s = SeriesSettings(rounds=None, start_grant=0, daily_topup=0)
    assert s.rounds is None and s.daily_topup == 0


async def test_a_start_resumes_the_one_series_however_often_and_concurrently(services: Services) -> None:
    name = _name(services)
    settings = SeriesSettings(round_ms=60_000, price=7, rounds=5, start_grant=50, daily_topup=20)
    starts = await asyncio.gather(*(start_series(services, settings, name=name) for _ in range(6)))
    assert len({s.id for s in starts}) == 1 and sum(s.created for s in starts) == 1
    again = await start_series(services, settings, name=name)
    assert again.id == starts[0].id and not again.created and again.changed == ()
    # One open job for round 0, whatever the number of starts (derived id).
    assert (await services.settlements.stats()).total == 1
    row = await live_series(services.pool, name)
    assert row is not None and (row.price, row.rounds, row.start_grant, row.daily_topup) == (7, 5, 50, 20)


async def test_a_restart_with_other_settings_stores_them_and_says_which(services: Services) -> None:
    name = _name(services)
    first = await start_series(services, SeriesSettings(round_ms=60_000, price=10), name=name)
    second = await start_series(services, SeriesSettings(round_ms=30_000, price=12, daily_topup=5),
                                name=name)
    assert second.id == first.id and set(second.changed) == {"round_ms", "price", "daily_topup"}
    assert second.settings.price == 12 and (await series_status(services, name)) == (
        await series_status(services, name))
    stored = await get_series(services.pool, first.id)
    assert stored is not None and (stored.round_ms, stored.price, stored.daily_topup) == (30_000, 12, 5)


async def test_postgresql_refuses_a_second_open_round_in_a_series(services: Services) -> None:
    status = await start_series(services, SeriesSettings(round_ms=60_000), name=_name(services))
    rows = [(f"RND-a-{status.id}", 0), (f"RND-b-{status.id}", 1)]
    async with await psycopg.AsyncConnection.connect(services.pool.conninfo) as conn:
        insert = ("INSERT INTO rounds (id, emoji_set, secret, opens_at, closes_at, guess_price, series_id,"
                  " series_index) VALUES (%s, 'classic', ARRAY['a','b','c','d','e','f'], now(),"
                  " now() + interval '1 minute', 10, %s, %s)")
        await conn.execute(insert, (rows[0][0], status.id, rows[0][1]))
        with pytest.raises(psycopg.errors.UniqueViolation, match="rounds_one_open_per_series"):
            await conn.execute(insert, (rows[1][0], status.id, rows[1][1]))
        await conn.rollback()


async def test_an_open_job_that_runs_early_waits_and_a_repeat_opens_nothing(services: Services) -> None:
    status = await start_series(services, SeriesSettings(round_ms=60_000, rounds=3), name=_name(services))
    sid = status.id
    job = OpenRound(sid, round_id(sid, 0), 0, 3, 60_000, 0, 10, "classic")
    first = await open_round(services, job)
    assert first is not None and not isinstance(first, NotYet) and first.state == "open"
    assert await open_round(services, job) == first  # a re-delivery: the same round, nothing new
    early = OpenRound(sid, round_id(sid, 1), 1, 3, 60_000, 0, 10, "classic")
    waits = await open_round(services, early)  # the overdue/duplicate opener of round 1, too soon
    assert isinstance(waits, NotYet) and waits.due == first.closes_at
    ahead = OpenRound(sid, round_id(sid, 2), 2, 3, 60_000, 0, 10, "classic")
    assert await open_round(services, ahead) is None  # round 2 before round 1: nothing
    assert await _rounds_of(services, sid) == [(0, "open")]


async def test_a_restart_after_the_round_closed_resumes_the_series_with_one_round_open(
        services: Services) -> None:
    """The issue's scenario: the bot is down while its round closes; on the restart the old
    series' overdue open job and the start both run, and still one series, one round open."""
    name = _name(services)
    settings = SeriesSettings(round_ms=400, rounds=4)
    status = await start_series(services, settings, name=name)
    app = App(services)
    tree = asyncio.create_task(app.run())

    async def opened(n: int) -> bool:
        return len(await _rounds_of(services, status.id)) >= n

    try:
        await eventually(lambda: opened(1), what="round 0 to open")
    finally:
        app.stop()  # the bot goes down
        await tree
    first = await get_round(services.pool, round_id(status.id, 0))
    assert first is not None

    async def past_close() -> bool:
        row = await get_round(services.pool, round_id(status.id, 0))
        assert row is not None
        return row.closes_at < datetime.now(UTC)

    await eventually(past_close, what="round 0's close")
    again = await start_series(services, settings, name=name)  # the restart
    assert again.id == status.id and not again.created
    app = App(services)
    tree = asyncio.create_task(app.run())
    seen_open: list[int] = []
    try:
        async def all_opened() -> bool:
            rounds = await _rounds_of(services, status.id)
            seen_open.append(sum(s == "open" for _, s in rounds))
            return len(rounds) == 4 and all(s == "settled" for _, s in rounds)

        await eventually(all_opened, what="the series' four rounds settled", timeout_s=30)
    finally:
        app.stop()
        await tree
    assert max(seen_open) <= 1
    async with services.pool.connection() as conn:
        cur = await conn.execute("SELECT count(*), max(next_index), min(state) FROM series WHERE name = %s",
                                 (name,))
        assert await cur.fetchone() == (1, 4, "finished")


async def test_a_start_while_a_finished_series_plays_its_last_round_starts_no_other(
        services: Services) -> None:
    """The season test's case: the last round opened (the series is finished) and the bot
    restarted before it was settled: the start answers the old series, opens nothing beside
    its last round; once that round is settled, a start begins a new series."""
    name = _name(services)
    settings = SeriesSettings(round_ms=60_000, rounds=1)
    status = await start_series(services, settings, name=name)
    job = OpenRound(status.id, round_id(status.id, 0), 0, 1, 60_000, 0, 10, "classic")
    opened = await open_round(services, job)
    assert opened is not None and not isinstance(opened, NotYet) and opened.state == "open"
    finished = await get_series(services.pool, status.id)
    assert finished is not None and finished.state == "finished"
    again = await start_series(services, settings, name=name)  # the restart mid-round
    assert again.id == status.id and not again.created
    async with services.pool.connection() as conn:
        await conn.execute("UPDATE rounds SET state = 'settled' WHERE series_id = %s", (status.id,))
    fresh = await start_series(services, settings, name=name)
    assert fresh.created and fresh.id != status.id


async def test_a_lost_open_job_is_admitted_again_by_a_kick(services: Services) -> None:
    status = await start_series(services, SeriesSettings(round_ms=60_000), name=_name(services))
    row = await live_series(services.pool, _name(services))
    assert row is not None
    assert not await kick(services, row)  # the start admitted it: a DUPLICATE
    lost = Services(services.pool, services.connector, suffix=services.suffix + "-lost")  # an empty Valkey
    assert await kick(lost, row)
    job = await lost.settlements.job(open_job_id(round_id(status.id, 0)))
    assert job is not None and job["state"] == b"pending"
    assert not await kick(lost, row)


async def test_a_paused_series_opens_nothing_until_resumed(services: Services) -> None:
    name = _name(services)
    status = await start_series(services, SeriesSettings(round_ms=60_000), name=name)
    paused = await pause_series(services, name)
    assert paused is not None and paused.state == "paused"
    job = OpenRound(status.id, round_id(status.id, 0), 0, 0, 60_000, 0, 10, "classic")
    assert await open_round(services, job) is None
    assert await _rounds_of(services, status.id) == []
    resumed = await resume_series(services, name)
    assert resumed is not None and resumed.state == "running" and resumed.epoch == 1
    # The resume admitted the open job under a new id (the old one may be done already).
    assert await services.settlements.job(open_job_id(round_id(status.id, 0), 1)) is not None
    opened = await open_round(services, job)
    assert opened is not None and not isinstance(opened, NotYet) and opened.state == "open"
    assert await _rounds_of(services, status.id) == [(0, "open")]


async def test_the_bots_old_call_resumes_the_series_instead_of_starting_another(
        services: Services) -> None:
    plan = RoundPlan(count=10_000, duration_ms=60_000, price=10)
    async with services.pool.connection() as conn:  # the module's database is shared by both backends
        await conn.execute("UPDATE series SET state = 'finished' WHERE name = 'main'")
    first = await ensure_rounds(services, plan)
    assert first is not None
    assert await ensure_rounds(services, plan) is None  # no second series
    status = await series_status(services)
    assert status is not None and status.id == first and status.settings.rounds == 10_000


async def test_concurrent_openers_of_one_round_open_it_once(services: Services) -> None:
    """Two processes' open jobs (a re-delivery racing the original, a kick racing a late job)
    run at once: the series' row lock lets one create the round; the rest answer it."""
    status = await start_series(services, SeriesSettings(round_ms=60_000), name=_name(services))
    job = OpenRound(status.id, round_id(status.id, 0), 0, 0, 60_000, 0, 10, "classic")
    results = await asyncio.gather(*(open_round(services, job) for _ in range(6)))
    assert len({r.id for r in results if r is not None and not isinstance(r, NotYet)}) == 1
    assert len({r.secret for r in results if r is not None and not isinstance(r, NotYet)}) == 1
    assert await _rounds_of(services, status.id) == [(0, "open")]


async def test_fewer_rounds_than_already_opened_finish_the_series(services: Services) -> None:
    name = _name(services)
    status = await start_series(services, SeriesSettings(round_ms=60_000, rounds=5), name=name)
    job = OpenRound(status.id, round_id(status.id, 0), 0, 5, 60_000, 0, 10, "classic")
    assert await open_round(services, job) is not None
    after = await start_series(services, SeriesSettings(round_ms=60_000, rounds=1), name=name)
    assert after.id == status.id and after.changed == ("rounds",) and after.state == "finished"
    assert await series_status(services, name) is None  # no live series of that name any more


async def test_a_player_finding_no_round_open_learns_when_the_next_opens(services: Services) -> None:
    """What the bot's "no round open" answer says (service.series.next_round): no series; the
    first round not opened yet; the next round's opening (its predecessor's close plus the
    gap); paused by the operators; over once the last round opened."""
    from datetime import timedelta

    from codemojex.bot.replies import no_round_text
    from codemojex.service.series import NextRound, next_round

    name = _name(services)
    assert (await next_round(services, name)).state == "none"
    status = await start_series(services, SeriesSettings(round_ms=300, rounds=2, gap_ms=5000), name=name)
    assert await next_round(services, name) == NextRound("running", None)  # its first round not open yet

    def job(index: int) -> OpenRound:
        return OpenRound(status.id, round_id(status.id, index), index, 2, 300, 5000, 10, "classic")

    opened = await open_round(services, job(0))
    assert opened is not None and not isinstance(opened, NotYet)
    nxt = await next_round(services, name)
    assert nxt.state == "running" and nxt.opens_at == opened.closes_at + timedelta(seconds=5)
    said = no_round_text(nxt.state, nxt.opens_at, opened.closes_at - timedelta(seconds=55))
    assert said == "⏳ No round is open right now; the next one opens in 1m 00s. Try /round then."
    assert "starts soon" in no_round_text(nxt.state, nxt.opens_at, opened.closes_at + timedelta(seconds=6))
    await pause_series(services, name)
    assert (await next_round(services, name)).state == "paused"
    assert "paused" in no_round_text("paused", None, datetime.now(UTC))
    await resume_series(services, name)

    async def last_opened() -> bool:  # round 0 closes after 300 ms; then round 1, the last, opens
        last = await open_round(services, job(1))
        return last is not None and not isinstance(last, NotYet)

    await eventually(last_opened, what="the last round open")
    assert (await next_round(services, name)).state == "over"
    assert no_round_text("over", None, datetime.now(UTC), "es").endswith("¡Gracias por jugar!")
