"""The chaos command's 60-second run: every fault kind at least once, then the audit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from codemojex.chaos.faults import KINDS
from tests.procfs import alive, children

pytestmark = [pytest.mark.slow, pytest.mark.cluster]
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(420)
def test_chaos_60s_loses_nothing_and_keeps_the_books(tmp_path: Path) -> None:
    out = tmp_path / "chaos.json"
    proc = subprocess.run(
        [sys.executable, "scripts/chaos.py", "--duration", "60", "--gap", "0.5", "2.5",
         "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=400)
    assert out.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert set(result["faults"]) == set(KINDS), result["faults"]
    for name, q in result["queues"].items():
        assert q["acked"] > 1000, (name, q)
        assert q["lost"] == 0 and q["two_states"] == 0, (name, q)
        assert q["completed_twice"] == 0 and q["stale_completions"] == 0 and q["unended"] == 0, (name, q)
        assert q["queued"] == 0 and q["dead_without_error"] == 0, (name, q)
    assert result["under_minimums"] == [], result["minimums"]
    for game in (result["game"], result["game_cluster"]):
        assert game["settled"] == game["rounds"] >= 5, game
        assert game["charged"] == game["scored"] > 0, game
        assert game["ledger_sum"] == 0 and game["negative_balances"] == 0, game
        assert game["duplicate_payouts"] == 0 and game["payout_mismatches"] == 0, game
    assert result["ok"], proc.stdout[-3000:]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "CHAOS CLEAN" in proc.stdout


@pytest.mark.timeout(120)
def test_the_chaos_command_itself_fails_a_run_under_its_minimum_of_work(tmp_path: Path) -> None:
    """Not only this wrapper: the command exits 1 and never prints CHAOS CLEAN when a queue
    acknowledged fewer jobs than its minimum (here one no run can reach)."""
    out = tmp_path / "chaos.json"
    proc = subprocess.run(
        [sys.executable, "scripts/chaos.py", "--duration", "2", "--no-cluster", "--no-game",
         "--kinds", "consumer_kill9", "--gap", "0", "0.5", "--min-acked", "1000000000", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=110)
    result = json.loads(out.read_text())
    assert proc.returncode == 1 and not result["ok"], proc.stdout[-3000:]
    assert result["queues"]["single"]["lost"] == 0  # clean otherwise: only the minimum fails it
    assert "under the minimum 1000000000" in proc.stdout and "CHAOS CLEAN" not in proc.stdout


@pytest.mark.timeout(300)
def test_the_game_on_the_cluster_rides_out_a_primary_killed_under_it(tmp_path: Path) -> None:
    """The short cluster form: the cluster game (its own database) keeps playing while the
    primary of its scoring queue's slot is killed with -9; every round settles, every charged
    guess is scored, the books balance. (The 60 s run above mixes it with every other fault.)"""
    out = tmp_path / "chaos.json"
    proc = subprocess.run(
        [sys.executable, "scripts/chaos.py", "--duration", "12", "--kinds", "game_primary_kill9",
         "--gap", "2", "3", "--round-seconds", "4", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=280)
    assert out.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["faults"]["game_primary_kill9"]["count"] >= 1, result["faults"]
    game = result["game_cluster"]
    assert game["settled"] == game["rounds"] >= 3, game
    assert game["charged"] == game["scored"] >= result["minimums"]["charged:game-cluster"], game
    assert game["ledger_sum"] == 0 and game["duplicate_payouts"] == 0 and game["payout_mismatches"] == 0
    assert result["ok"] and proc.returncode == 0, proc.stdout[-3000:]
    assert "CHAOS CLEAN" in proc.stdout


@pytest.mark.timeout(240)
def test_a_killed_chaos_run_leaves_no_process_behind(tmp_path: Path) -> None:
    """kill -9 of the chaos command ends every process it started (servers, workers, the game's
    consumer process): each child asks Linux to end it with its parent (PR_SET_PDEATHSIG)."""
    import os
    import signal
    import time

    proc = subprocess.Popen(
        [sys.executable, "scripts/chaos.py", "--duration", "120", "--gap", "30", "31",
         "--json", str(tmp_path / "chaos.json")],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 150
        kids: dict[int, str] = {}
        while time.monotonic() < deadline and proc.poll() is None:
            kids = children(proc.pid)
            if any("codemojex.chaos.worker" in c for c in kids.values()) and any(
                    "codemojex.chaos.game_proc" in c for c in kids.values()):
                break
            time.sleep(0.2)
        assert any("codemojex.chaos.worker" in c for c in kids.values()), kids
        assert any("codemojex.chaos.game_proc" in c for c in kids.values()), kids
        kids = children(proc.pid)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(alive(p) for p in kids):
        time.sleep(0.2)
    left = {p: c for p, c in kids.items() if alive(p)}
    for pid in left:  # only processes this test's child started
        os.kill(pid, signal.SIGKILL)
    assert not left, left
