"""The game's dashboard page in a real headless Chromium: rounds, pots, guesses scored,
payouts and the audit, over the wallet on a real PostgreSQL."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

from codemojex.domain import CLASSIC
from codemojex.infra.pg import open_pool
from codemojex.ops.dashboard import game_page
from codemojex.wallet import (
    Charged,
    charge_guess,
    close_round,
    create_round,
    ensure_player,
    grant_start,
    migrate,
    record_score,
    settle_round,
)
from echomq.ops.dashboard import DashboardOptions, create_app
from tests.codemojex.support import new_id
from tests.dashboard_support import browser, served

SECRET = ("😀", "😎", "🤖", "👻", "🐱", "🐶")


async def _seed(db_url: str) -> dict[str, str]:
    """One settled round (two players, both guesses scored and paid) and one open round."""
    pool = await open_pool(db_url, min_size=1, max_size=4)
    try:
        await migrate(pool)
        now = datetime.now(UTC)
        settled, live = new_id("RND"), new_id("RND")
        for rid, closes in ((settled, now + timedelta(hours=1)), (live, now + timedelta(hours=2))):
            assert await create_round(pool, rid, emoji_set=CLASSIC.id, secret=SECRET,
                                      opens_at=now - timedelta(minutes=5), closes_at=closes, guess_price=10)
        players = []
        for name in ("ada", "bob"):
            player = new_id("PLR")
            assert await ensure_player(pool, player, name=name)
            await grant_start(pool, player, 100)
            players.append(player)
        for player, points in zip(players, (600, 300), strict=True):
            guess = new_id()
            assert isinstance(await charge_guess(pool, player, settled, guess, SECRET), Charged)
            await record_score(pool, guess, points)
        assert isinstance(await charge_guess(pool, players[0], live, new_id(), SECRET), Charged)
        assert await close_round(pool, settled) == "closed"
        paid = await settle_round(pool, settled)
        assert isinstance(paid, tuple) and paid
        return {"settled": settled, "live": live}
    finally:
        await pool.close()


def test_the_codemojex_page_shows_rounds_payouts_and_the_audit(valkey_url: str, db_url: str,
                                                               tmp_path: Path) -> None:
    rounds = asyncio.run(_seed(db_url))  # before the browser: Playwright keeps a loop running
    app = create_app(valkey_url, options=DashboardOptions(refresh_s=0), pages=[game_page(db_url)])
    with served(app) as url, browser() as chromium:
        page = chromium.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(15_000)
        page.goto(url + "/")
        page.click("header nav >> text=Codemojex")
        page.wait_for_url(url + "/x/codemojex")
        open_row = page.locator("table.rounds tbody tr").all_inner_texts()
        assert len(open_row) == 1 and rounds["live"] in open_row[0] and "\t10\t1\t0 / 1\t" in open_row[0]
        done_row = page.locator("table.settled tbody tr").all_inner_texts()
        assert len(done_row) == 1 and rounds["settled"] in done_row[0] and "2 / 2" in done_row[0]
        payouts = page.locator("table.payouts tbody tr").all_inner_texts()
        assert payouts and all(rounds["settled"] in p for p in payouts)
        assert any("\tada\t20\t" in p for p in payouts), payouts  # the 600-point guess takes the pot
        assert "\t20\t2\t2 / 2\t20 to 1" in done_row[0]
        assert "the books balance" in page.inner_text("h2#audit")
        page.screenshot(path=str(tmp_path / "codemojex.png"), full_page=True)
        assert (tmp_path / "codemojex.png").stat().st_size > 10_000
