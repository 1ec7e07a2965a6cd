"""PostgreSQL faults during charging and settlement: immediate restart, backend
termination and a statement_timeout storm, each at least twice, while players charge
guesses and rounds close and settle every 5 s. The books are audited after every fault,
and at the end every round is settled and every charged guess scored once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
KINDS = ("pg_restart", "pg_terminate", "pg_timeout_storm")


@pytest.mark.timeout(300)
def test_money_holds_and_every_round_settles_under_postgresql_faults(tmp_path: Path) -> None:
    out = tmp_path / "pg.json"
    proc = subprocess.run(
        [sys.executable, "scripts/chaos.py", "--no-cluster", "--kinds", ",".join(KINDS),
         "--duration", "30", "--gap", "0.5", "1.5", "--round-seconds", "5", "--rate", "50",
         "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=280)
    assert out.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert set(result["faults"]) == set(KINDS), result["faults"]
    assert all(result["faults"][k]["count"] >= 2 for k in KINDS), result["faults"]
    audits = result["audits_after_pg_faults"]
    assert len(audits) == sum(f["count"] for f in result["faults"].values())
    assert all(a["ok"] for a in audits), audits
    game = result["game"]
    assert game["settled"] == game["rounds"] >= 5, game
    assert game["charged"] == game["scored"] > 0 and game["unadmitted"] == 0, game
    assert game["ledger_sum"] == 0 and game["negative_balances"] == 0, game
    assert game["duplicate_payouts"] == 0 and game["payout_mismatches"] == 0, game
    assert game["failures"] == [], game
    assert result["ok"] and proc.returncode == 0, proc.stdout[-3000:]
