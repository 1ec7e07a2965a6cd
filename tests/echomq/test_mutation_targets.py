"""The mutation check (scripts/mutation_check.py) stays armed: every mutant's target is on
exactly one line of the Lua it names, and every line marked as a fence or threshold
check is some mutant's target. The check itself is slow and runs on its own."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mutation_check", ROOT / "scripts" / "mutation_check.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_every_mutant_target_is_found_once_in_the_lua() -> None:
    mc = _load()
    assert len(mc.MUTANTS) >= 15
    mc.check_targets(ROOT / "src" / "echomq" / "protocol" / "lua")


def test_a_missing_target_fails_loudly(tmp_path: Path) -> None:
    mc = _load()
    lua = tmp_path / "lua"
    lua.mkdir()
    for f in (ROOT / "src" / "echomq" / "protocol" / "lua").glob("*.lua"):
        (lua / f.name).write_text(f.read_text())
    m = mc.MUTANTS[0]
    (lua / m.file).write_text((lua / m.file).read_text().replace(m.old, "-- refactored away"))
    with pytest.raises(mc.TargetError, match="found on 0 lines"):
        mc.check_targets(lua)


def test_a_marked_check_without_a_mutant_fails_loudly(tmp_path: Path) -> None:
    mc = _load()
    lua = tmp_path / "lua"
    lua.mkdir()
    for f in (ROOT / "src" / "echomq" / "protocol" / "lua").glob("*.lua"):
        (lua / f.name).write_text(f.read_text())
    (lua / "stats.lua").write_text((lua / "stats.lua").read_text()
                                   + "if x then return 0 end -- fence: a new check\n")
    with pytest.raises(mc.TargetError, match="no mutant removes"):
        mc.check_targets(lua)
