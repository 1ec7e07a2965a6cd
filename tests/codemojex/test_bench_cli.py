"""``codemojex bench`` as an operator runs it: a short unpaced game on embedded servers ends
with exit code 0, a clean audit and a report of the shape docs/capacity.md quotes (the rate
end to end, and per guess Valkey CPU, PostgreSQL transactions and CPU, messages, with the
idle cost measured apart). No figure is asserted: timings belong in benches. A refused
argument is one line on stderr, never a traceback."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
CODEMOJEX = str(Path(sys.executable).with_name("codemojex"))


async def _run(*args: str, **extra: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ECHOMQ_URL", "CODEMOJEX_DATABASE_URL")}
    proc = await asyncio.create_subprocess_exec(CODEMOJEX, *args, cwd=ROOT,
                                                env=env | {"NO_COLOR": "1"} | extra,
                                                stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 240)
    assert proc.returncode is not None
    return proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")


async def test_a_short_bench_reports_its_costs_per_guess_with_the_audit_clean() -> None:
    code, out, err = await _run("bench", "--players", "4", "--round-seconds", "1.5",
                                "--idle-seconds", "0.5", "--in-flight", "4", "--json")
    assert code == 0, (out + err)[-3000:]
    report = json.loads(out)
    assert report["audit_ok"] is True and report["audit_failures"] == []
    assert report["players"] == 4 and report["charged"] > 0
    assert report["guesses_per_s"] > 0 and report["seconds"] >= report["submit_s"] > 0
    # Unpaced players stop only when the round refuses them (closed or expired).
    assert set(report["refused"]) <= {"closed", "expired"} and sum(report["refused"].values()) == 4
    for key in ("valkey_cpu_us", "pg_xacts", "pg_cpu_us", "messages", "client_cpu_us"):
        assert key in report["per_guess"]
    for key in ("valkey_cpu_ms", "pg_xacts", "pg_cpu_ms", "notes", "client_cpu_ms"):
        assert key in report["idle"]
    # Embedded servers run on this machine: every figure is read, none is "n/a".
    assert all(v is not None for v in report["per_guess"].values())
    # A player's scores not told yet go out in one message: never more than one per guess.
    assert 0 < report["per_guess"]["messages"] <= 1.0
    assert report["notes"]["told"] >= 1 and report["notes"]["told"] <= report["charged"]
    assert report["totals"]["pg_xacts"] > 0 and report["cores"] >= 1
    assert report["batches"]["charges"] >= 1.0  # the charges went through the group commit
    assert "evalsha" in report["commands"]


async def test_the_text_report_names_each_figure() -> None:
    code, out, err = await _run("bench", "--players", "2", "--round-seconds", "1", "--idle-seconds", "0.2")
    assert code == 0, (out + err)[-3000:]
    assert "guesses/s end to end" in out and "per guess: Valkey CPU" in out
    assert "idle, per second (subtracted)" in out and "load average" in out
    assert out.rstrip().endswith("AUDIT CLEAN")


@pytest.mark.parametrize("args", [("--players", "0"), ("--round-seconds", "0"), ("--in-flight", "x")])
async def test_a_refused_argument_is_one_line(args: tuple[str, ...]) -> None:
    code, out, err = await _run("bench", *args)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "error" in err and "Traceback" not in err


async def test_a_valkey_that_does_not_answer_is_one_line() -> None:
    code, out, err = await _run("bench", "--players", "1", "--round-seconds", "1", "--idle-seconds", "0",
                                ECHOMQ_URL="redis://127.0.0.1:1")
    assert code == 2 and out == ""
    assert err.startswith("codemojex bench: error:") and len(err.strip().splitlines()) == 1, err
