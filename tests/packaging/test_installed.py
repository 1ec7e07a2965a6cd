"""The installed package works: wheel and sdist built, the wheel installed (not editable)
into a fresh venv outside the checkout, one job enqueued, consumed and completed there."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_wheel_installed_in_a_fresh_venv_runs_a_job() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "check_installed.py")],
                          cwd=ROOT, capture_output=True, text=True, timeout=880)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "smoke ok:" in proc.stdout and "installed" in proc.stdout
