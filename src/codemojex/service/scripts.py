"""The game's Lua scripts: one file per script in ``lua/``, loaded as package data.

Each file opens with the same contract header as EchoMQ's (``#!lua``, name, summary,
KEYS, ARGV, RETURNS, ERRORS) and is parsed by EchoMQ's loader
(:func:`echomq.parse_script`), so a file without its contract, or a call whose key
count does not fit it, is refused exactly as for the library's own scripts. Both
distributions ship their ``lua/`` directory as package data (checked by
``tests/packaging/test_package_data.py`` and the installed-wheel smoke test).
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from echomq import Script, ScriptContractError, parse_script

__all__ = ["bundle", "game_script"]


@cache
def bundle() -> dict[str, Script]:
    """Every script of the game, by name, parsed once per process."""
    root = resources.files("codemojex") / "lua"
    return {
        f.name.removesuffix(".lua"): parse_script(f.name.removesuffix(".lua"), f.read_text(encoding="utf-8"))
        for f in root.iterdir()
        if f.name.endswith(".lua")
    }


def game_script(name: str) -> Script:
    """One script of the game by name (a :class:`~echomq.ScriptContractError` if none)."""
    try:
        return bundle()[name]
    except KeyError:
        raise ScriptContractError(f"no game script named {name!r}") from None
