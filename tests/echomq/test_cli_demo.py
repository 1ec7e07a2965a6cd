"""``echomq demo``: a verb registered through the group's ``lazy`` table is listed without
being loaded, and when run admits then drains its batch (the three duplicates and the
wrong-kind id refused, the queue empty afterwards)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from echomq.ops.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_the_demo_is_listed_without_being_loaded() -> None:
    code = ("import sys, click\nfrom echomq.ops.cli import main\n"
            "assert 'demo' in main.list_commands(click.Context(main))\n"
            "assert 'echomq.ops.cli_demo' not in sys.modules and 'rich' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, env={"PYTHONPATH": str(ROOT / "src")},
                   timeout=120)
    result = CliRunner().invoke(main, ["--help"], prog_name="echomq")
    assert result.exit_code == 0 and re.search(r"demo\s+Admit a batch", result.stdout), result.stdout


def test_the_demo_admits_and_drains_its_batch(valkey_url: str, qname: str) -> None:
    result = CliRunner(env={"ECHOMQ_URL": valkey_url, "COLUMNS": "200"}).invoke(
        main, ["demo", "--jobs", "300", "--queue", qname], prog_name="echomq")
    assert result.exit_code == 0, result.output
    out = result.stdout
    for verdict, count in (("enqueued", 300), ("duplicate", 3), ("kind", 1)):
        assert re.search(rf"{verdict}\s*│\s*{count}\s*│", out), (verdict, out)
    assert "queue now: pending=0 active=0 done=300" in " ".join(out.split()), out  # rich may wrap it
