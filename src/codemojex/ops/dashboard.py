"""The game's page in the EchoMQ dashboard (``codemojex dashboard``): rounds, pots,
guesses scored, payouts and the wallet audit, read from PostgreSQL.

It plugs into :func:`echomq.ops.dashboard.create_app` as a :class:`~echomq.ops.dashboard.Page`
(echomq never imports the game; the game hands its page to the dashboard). Reads
only; the audit is :func:`codemojex.wallet.audit`, the same check ``codemojex play``
prints.
"""

from __future__ import annotations

from typing import Any

from psycopg_pool import AsyncConnectionPool

from codemojex.infra.pg import open_pool
from codemojex.wallet import audit, reads
from echomq import dashboard as board

__all__ = ["game_page", "render"]

def _ms(ts: Any) -> float:
    return float(ts.timestamp() * 1000)


def _round_rows(rows: list[tuple[Any, ...]], now_ms: float) -> list[list[str]]:
    out = []
    for rid, emoji_set, state, _opens, closes, settled, price, pot, guesses, scored, paid, payees in rows:
        when = (f"settled {board.ago(_ms(settled), now_ms)}" if settled is not None
                else f"closes {board.ago(_ms(closes), now_ms)}" if state == "open"
                else f"closed {board.ago(_ms(closes), now_ms)}")
        out.append([f'<span class="mono">{board.esc(rid)}</span>', board.esc(emoji_set),
                    board.badge(state), when,
                    f"{price:,}", f"{pot:,}", f"{guesses:,}", f"{scored:,} / {guesses:,}",
                    f"{paid:,} to {payees:,}" if payees else "–"])
    return out


async def render(pool: AsyncConnectionPool, *, limit: int = 20) -> str:
    """The page's body (HTML, every value escaped)."""
    players, live, settled, at_stake, paid, now_ms = await reads.dashboard_totals(pool)
    now_ms = float(now_ms)
    live_rows = await reads.dashboard_rounds(pool, settled=False, limit=limit)
    done_rows = await reads.dashboard_rounds(pool, settled=True, limit=limit)
    payouts = await reads.dashboard_payouts(pool, limit)
    books = await audit(pool)
    heads = ["round", "emoji set", "state", "when", "price", "pot (charged)", "guesses", "scored", "paid"]
    values = [*books.findings.items(), ("charged_guesses", books.charged_guesses),
              ("scored_guesses", books.scored_guesses)]
    checks = [[board.esc(name.replace("_", " ")), f'<span class="mono">{board.esc(value)}</span>']
              for name, value in values]
    verdict = ('<span class="ok">✔ the books balance</span>' if books.ok
               else '<span class="bad">✘ the audit found a discrepancy</span>')
    cards = "".join(f'<div class="card stat"><b>{v:,}</b><span>{board.esc(k)}</span></div>' for k, v in (
        ("players", players), ("open rounds", live), ("settled rounds", settled),
        ("coins in open pots", at_stake), ("coins paid out", paid)))
    prow = [[f'<span class="mono">{board.esc(r)}</span>', board.esc(name or pid), f"{amount:,}",
             board.ago(_ms(at), now_ms)]
            for r, pid, name, amount, at in payouts]
    live_t = board.table(heads, _round_rows(live_rows, now_ms), cls="rounds", empty="no open round")
    done_t = board.table(heads, _round_rows(done_rows, now_ms), cls="settled", empty="no round settled yet")
    pay_t = board.table(["round", "player", "coins", "when"], prow, cls="payouts", empty="no payout yet")
    return (f'<h1>Codemojex</h1><div class="cards">{cards}</div>'
            f"<h2>Open and closing rounds</h2>{live_t}<h2>Recently settled rounds</h2>{done_t}"
            f"<h2>Recent payouts</h2>{pay_t}"
            f'<h2 id="audit">Audit: {verdict}</h2>{board.table(["check", "value"], checks, cls="audit")}')


def game_page(database_url: str) -> board.Page:
    """The Codemojex page over the wallet at ``database_url`` (its pool opens with the app)."""
    box: dict[str, AsyncConnectionPool] = {}

    async def startup() -> None:
        box["pool"] = await open_pool(database_url, min_size=1, max_size=4, checkout_timeout=5.0,
                                 name="codemojex-dashboard")

    async def cleanup() -> None:
        if "pool" in box:
            await box.pop("pool").close()

    async def body() -> str:
        return await render(box["pool"])

    return board.Page(slug="codemojex", title="Codemojex", render=body, startup=startup, cleanup=cleanup)
