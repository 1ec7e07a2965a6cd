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


def test_every_probe_a_mutant_names_exists() -> None:
    from tests.echomq.mutation_probes import PROBES

    mc = _load()
    named = {p for m in mc.MUTANTS for p in m.probes}
    assert named <= set(PROBES), named - set(PROBES)
    assert all(m.probes for m in mc.MUTANTS if not m.model)  # no mutant is run by nothing


def test_an_update_rewrites_only_the_rows_run(tmp_path: Path) -> None:
    mc = _load()
    lua = ROOT / "src" / "echomq" / "protocol" / "lua"
    first, second = mc.MUTANTS[0], mc.MUTANTS[1]
    earlier = (mc.PREAMBLE + "Mutation check at `abc`: 2 mutants.\n\n"
               "| mutant | file:line | change | killed |\n|---|---|---|---|\n"
               + mc._row(lua, first, "17/20 **SURVIVES**") + "\n" + mc._row(lua, second, "20/20")
               + "\n")
    rows, head = mc._parse(earlier)
    assert head == "Mutation check at `abc`: 2 mutants.\n\n"
    assert mc._parse(earlier.replace("Mutation check", "Some words.\n\nMutation check"))[1] == head
    addendum = earlier + "\n## Run on their own\n\n" + mc._row(lua, first, "3/3") + "\n"
    assert mc._parse(addendum)[0] == rows
    assert mc._tail(addendum) == "## Run on their own\n\n" + mc._row(lua, first, "3/3") + "\n"
    assert mc._tail(earlier) == ""
    assert rows == {first.name: mc._row(lua, first, "17/20 **SURVIVES**"),
                    second.name: mc._row(lua, second, "20/20")}
