"""The generator of the blocking code and tests: current, and strict about its own rules."""

from __future__ import annotations

import importlib.util
import re
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


def _async_test_modules(folder: Path) -> set[str]:
    """The test modules of ``folder`` (not its subfolders) with a coroutine test."""
    return {p.name for p in folder.glob("test_*.py")
            if re.search(r"^\s*async def test_", p.read_text(encoding="utf-8"), re.M)}


def test_every_async_test_module_has_a_twin_or_a_reason(gen: ModuleType) -> None:
    """An asyncio test module of tests/echomq/ outside _async/ gets no blocking twin, so it
    must say why in the generator's table; a reason for a module that is gone (or has no
    coroutine test any more) is stale."""
    here = SCRIPT.parents[1] / "tests" / "echomq"
    found = _async_test_modules(here)
    assert len(found) > 20  # the walk read the folder
    assert sorted(found - gen.ASYNC_ONLY.keys()) == [], "move into _async/ or give a reason in ASYNC_ONLY"
    assert sorted(gen.ASYNC_ONLY.keys() - found) == [], "stale reasons in ASYNC_ONLY"
    assert all(len(why.split()) >= 4 for why in gen.ASYNC_ONLY.values())  # a reason, not a word
    assert not _async_test_modules(here / "_async") & gen.ASYNC_ONLY.keys()


def test_an_unlisted_async_module_is_found(tmp_path: Path) -> None:
    (tmp_path / "test_a.py").write_text("async def test_x() -> None:\n    pass\n")
    (tmp_path / "test_b.py").write_text("def test_y() -> None:\n    pass\n")
    (tmp_path / "test_c.py").write_text("class T:\n    async def test_z(self) -> None:\n        pass\n")
    assert _async_test_modules(tmp_path) == {"test_a.py", "test_c.py"}
