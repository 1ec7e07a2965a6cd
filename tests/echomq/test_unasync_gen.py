"""The generator of the blocking code and tests: current, and strict about its own rules."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "unasync_gen.py"


@pytest.fixture
def gen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("unasync_gen_under_test", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_trees_are_current(gen: ModuleType) -> None:
    assert gen.main(check=True) == 0


def test_both_trees_are_generated(gen: ModuleType) -> None:
    want = gen.generate()
    for _, dst in gen.TREES:
        names = {p.name for p in want if p.parent == dst and want[p] is not None}
        assert "__init__.py" in names and len(names) > 1, dst
    sync_tests = {p.name for p in want if p.parent == gen.TREES[1][1]}
    assert {"conftest.py", "test_wire_exchange.py"} <= sync_tests


def test_a_rule_that_never_fires_fails_the_generator(
        gen: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(gen, "REPLACEMENTS", [*gen.REPLACEMENTS, (r"\bNoSuchNameAnywhere\b", "X")])
    with pytest.raises(gen.DeadRule, match="NoSuchNameAnywhere"):
        gen.generate()
    assert gen.main(check=True) == 1
    assert gen.main(check=False) == 1  # nothing is written either
    assert "NoSuchNameAnywhere" in capsys.readouterr().err


SOURCE = """\"\"\"The asyncio implementation. x\"\"\"
import asyncio


async def go(q: AsyncQueue) -> None:
    await asyncio.sleep(0)
"""
RULES = [
    (r"^import asyncio\n", "import time\n"),
    (r"\basyncio\.sleep\b", "time.sleep"),
    (r"\basync def\b", "def"),
    (r"\bawait ", ""),
    (r"\bAsyncQueue\b", "Queue"),
    (r"The asyncio implementation\.[^\"]*", "The blocking implementation."),
]


def test_a_stale_or_orphaned_copy_is_reported_and_rewritten(
        gen: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src, dst = tmp_path / "_async", tmp_path / "_sync"
    src.mkdir()
    dst.mkdir()
    (src / "a.py").write_text(SOURCE)  # one small tree where each of RULES fires
    (dst / "orphan.py").write_text("x = 1\n")
    monkeypatch.setattr(gen, "ROOT", tmp_path)
    monkeypatch.setattr(gen, "TREES", [(src, dst)])
    monkeypatch.setattr(gen, "REPLACEMENTS", RULES)
    assert gen.main(check=True) == 1
    assert gen.main(check=False) == 0
    assert not (dst / "orphan.py").exists()
    text = (dst / "a.py").read_text()
    assert text.startswith("# Generated from _async/a.py by scripts/unasync_gen.py. Do not edit.\n")
    assert "async def" not in text and "await " not in text and "AsyncQueue" not in text
    assert "def go(q: Queue) -> None:\n    time.sleep(0)" in text
    assert gen.main(check=True) == 0
