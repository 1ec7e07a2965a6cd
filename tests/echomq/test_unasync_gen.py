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


# A module that touches every rule once (its text is not meant to run).
EVERY_RULE_FIRES = '''"""The asyncio implementation. x"""
"""The asyncio API tests. x"""
import asyncio
import time
from collections.abc import AsyncIterator

import redis.asyncio as redis_client

from echomq._async.wire import AsyncWire
from echomq._stream import AsyncStream

__all__ = ["AsyncConnector", "AsyncQueue", "AsyncUpkeep", "AsyncClusterConnector"]


async def connect_async(w: AsyncWire, s: AsyncStream, r: redis_client.Redis) -> AsyncIterator[int]:
    async with w:
        await asyncio.sleep(0)
    await w.aclose()
    time.monotonic()
    yield 1


def __aenter__() -> None: ...
def __aexit__() -> None: ...
'''


def test_a_stale_or_orphaned_copy_is_reported_and_rewritten(
        gen: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src, dst = tmp_path / "_async", tmp_path / "_sync"
    src.mkdir()
    dst.mkdir()
    # one small tree where every rule fires
    (src / "a.py").write_text(EVERY_RULE_FIRES)
    (dst / "orphan.py").write_text("x = 1\n")
    monkeypatch.setattr(gen, "ROOT", tmp_path)
    monkeypatch.setattr(gen, "TREES", [(src, dst)])
    assert gen.main(check=True) == 1
    assert gen.main(check=False) == 0
    assert not (dst / "orphan.py").exists()
    text = (dst / "a.py").read_text()
    assert text.startswith("# Generated from _async/a.py by scripts/unasync_gen.py. Do not edit.\n")
    assert "async def" not in text and "await " not in text and "AsyncQueue" not in text
    assert gen.main(check=True) == 0
