"""The charging door's flush (service/charges.py): one result per guess, in input order,
whatever rounds the guesses of one flush are for, and no invariant of it left to an
``assert`` (``python -O`` strips them). Real PostgreSQL and Valkey."""

from __future__ import annotations

import ast
from pathlib import Path

from codemojex.service import Services
from codemojex.service.charges import Charges
from codemojex.wallet.batch import ChargeItem
from codemojex.wallet.results import Charged, RoundRefused
from echomq.core import ids
from tests.codemojex.game import PRICE, SECRET, make_player, make_round

SERVICE = Path(__file__).resolve().parents[2] / "src" / "codemojex" / "service"


def _rotated(n: int) -> tuple[str, ...]:
    return SECRET[n:] + SECRET[:n]


async def test_a_flush_over_several_rounds_answers_each_guess_in_input_order(services: Services) -> None:
    cheap, dear = await make_round(services.pool), await make_round(services.pool, price=2 * PRICE)
    gone = ids.generate("RND")  # no such round: refused, beside the others
    ada = await make_player(services.pool, 10 * PRICE)
    rounds = [cheap, dear, gone, cheap, dear, cheap]
    items = [(rid, ChargeItem(ada, ids.generate("JOB"), _rotated(n))) for n, rid in enumerate(rounds)]
    out = await Charges(services.pool, services.scores)._flush(items)
    assert len(out) == len(items)
    outcomes = [r[0] if isinstance(r, tuple) else r for r in out]
    assert [type(o) for o in outcomes] == [Charged, Charged, RoundRefused, Charged, Charged, Charged]
    assert [r[1] for r in out if isinstance(r, tuple)] == [_rotated(n) for n in range(len(items))]
    charged = [(o.guess_id, o.price) for o in outcomes if isinstance(o, Charged)]
    assert charged == [(item.guess_id, 2 * PRICE if rid == dear else PRICE)
                       for rid, item in items if rid != gone]
    refused = outcomes[2]
    assert isinstance(refused, RoundRefused) and refused.round_id == gone
    assert all(r[2] for r in out if isinstance(r, tuple) and isinstance(r[0], Charged))  # admitted at once


def test_the_service_layer_leaves_no_invariant_to_an_assert() -> None:
    """An ``assert`` is gone under ``python -O``: what the service layer relies on is a
    typed error or holds by construction (charges.py's flush answered each guess behind
    ``assert all(r is not None ...)`` until it built its answer by position)."""
    found = [f"{path.name}:{node.lineno}" for path in sorted(SERVICE.glob("*.py"))
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, ast.Assert)]
    assert found == []
