"""The game's Lua scripts are ``.lua`` files with a contract header, loaded like EchoMQ's.

* Every file in ``src/codemojex/lua/`` parses with EchoMQ's loader (the contract header
  is enforced) and stays under the house limit of ~80 lines.
* No Lua source is left inside a Python module of the game.
* The cache's shadow script refuses a malformed call on a real server with nothing written.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import pytest

from codemojex.service.cache import SHADOW
from codemojex.service.scripts import bundle, game_script
from echomq import AsyncConnector, InvalidArgument, ScriptContractError

SRC = Path(__file__).resolve().parents[2] / "src" / "codemojex"


def test_every_game_script_is_a_lua_file_with_its_contract() -> None:
    scripts = bundle()
    files = sorted(p.stem for p in (SRC / "lua").glob("*.lua"))
    assert files == sorted(scripts) and "cache_shadow" in scripts
    for name, script in scripts.items():
        text = (resources.files("codemojex") / "lua" / f"{name}.lua").read_text(encoding="utf-8")
        assert script.source == text and script.returns and script.errors
        assert len(text.splitlines()) <= 80, name
    assert game_script("cache_shadow") is SHADOW
    assert SHADOW.keys == ("shadow",) and SHADOW.argv == ("ttl_ms", "fields")


def test_an_unknown_game_script_is_a_contract_error() -> None:
    with pytest.raises(ScriptContractError, match="no game script"):
        game_script("nope")


def test_no_lua_source_is_left_in_a_python_module() -> None:
    opening = re.compile(r"[\"']#!lua")  # a string literal that opens a script
    holders = {str(p.relative_to(SRC)) for p in SRC.rglob("*.py")
               if opening.search(p.read_text(encoding="utf-8"))}
    assert holders == set()


@pytest.mark.parametrize("argv", [[0, "a", "1"], ["x", "a", "1"], [1000, "a"], [1000]])
async def test_the_shadow_script_refuses_a_bad_call_and_writes_nothing(
    conn: AsyncConnector, qname: str, argv: list[object]
) -> None:
    shadow = f"cm:cache:{{{qname}:k}}:shadow:t"
    with pytest.raises(InvalidArgument, match="cache_shadow"):
        await conn.eval(SHADOW, [shadow], argv)
    assert int(await conn.command("EXISTS", shadow)) == 0
