from __future__ import annotations

import pytest

from echomq import ScriptContractError
from echomq.protocol.scripts import bundle, check_includes, load, parse

GOOD = """#!lua
-- name: demo
-- summary: a demo
-- KEYS[1] a: first
-- KEYS[2..] rest: the others
-- ARGV[1] x: a value
-- RETURNS: 1
-- ERRORS: none
return 1
"""


def test_every_script_has_a_contract_and_the_shebang() -> None:
    scripts = bundle()
    assert {"enqueue", "claim", "complete", "retry", "promote", "reap", "browse",
            "pending_size", "heartbeat"} <= set(scripts)
    for script in scripts.values():
        assert script.source.startswith("#!lua")
        assert script.keys, script.name


def test_enqueue_contract_is_the_seeds() -> None:
    s = load("enqueue")
    # The seed's two arguments, then the call token (docs/protocol.md, "Call tokens").
    assert s.keys[:2] == ("job", "pending") and s.argv == ("id", "payload", "token")
    assert "EMQKIND" in s.source and "'state', 'pending', 'attempts', '0', 'payload'" in s.source


def test_parse_reads_the_header() -> None:
    s = parse("demo", GOOD)
    assert s.keys == ("a", "rest") and s.variadic_keys and s.argv == ("x",)
    s.check(1, 1)
    s.check(5, 1)
    with pytest.raises(ScriptContractError):
        s.check(0, 1)
    with pytest.raises(ScriptContractError):
        s.check(2, 2)


@pytest.mark.parametrize(
    ("broken", "why"),
    [
        (GOOD.replace("#!lua\n", ""), "#!lua"),
        (GOOD.replace("name: demo", "name: other"), "name"),
        (GOOD.replace("-- RETURNS: 1\n", ""), "RETURNS"),
        (GOOD.replace("-- ERRORS: none\n", ""), "ERRORS"),
        (GOOD.replace("KEYS[2..]", "KEYS[3]"), "out of order"),
        (GOOD.replace("-- summary: a demo\n", ""), "summary"),
        (GOOD.replace("return 1", "-- @include nope\nreturn 1"), "include"),
    ],
)
def test_loader_refuses_a_broken_header(broken: str, why: str) -> None:
    with pytest.raises(ScriptContractError, match=why):
        parse("demo", broken)


def test_unknown_script_is_refused() -> None:
    with pytest.raises(ScriptContractError):
        load("nope")


# Includes declare their own includes and are expanded once, at load (BullMQ's build).
CLOCK = "-- now_ms(): the clock\nlocal function now_ms() return 1 end\n"
GATE = "-- gate(): open?\n-- @include clock\nlocal function gate() return now_ms() > 0 end\n"


def test_an_include_brings_its_own_includes_once_and_first() -> None:
    s = parse("demo", GOOD.replace("return 1", "-- @include gate\n-- @include clock\nreturn 1"),
              {"clock": CLOCK, "gate": GATE})
    assert s.source.count("local function now_ms()") == 1
    assert s.source.index("local function now_ms()") < s.source.index("local function gate()")
    assert "@include" not in s.source


def test_an_undeclared_include_is_refused() -> None:
    undeclared = GATE.replace("-- @include clock\n", "")
    with pytest.raises(ScriptContractError, match=r"include/gate.lua uses now_ms from include/clock.lua"):
        check_includes({"clock": CLOCK, "gate": undeclared})
    check_includes({"clock": CLOCK, "gate": GATE})  # declared: accepted
    # a name in a comment or a string is no use
    check_includes({"clock": CLOCK, "gate": "-- now_ms\nlocal function gate() return 'now_ms' end\n"})


def test_an_include_circle_or_an_unknown_include_is_refused() -> None:
    circle = {"a": "-- @include b\nlocal function fa() end\n",
              "b": "-- @include a\nlocal function fb() end\n"}
    with pytest.raises(ScriptContractError, match="include circle"):
        parse("demo", GOOD.replace("return 1", "-- @include a\nreturn 1"), circle)
    with pytest.raises(ScriptContractError, match="unknown include 'nope'"):
        check_includes({"a": "-- @include nope\nlocal function fa() end\n"})


def test_the_packaged_includes_declare_what_they_use() -> None:
    from importlib import resources

    root = resources.files("echomq.protocol") / "lua" / "include"
    include = {f.name.removesuffix(".lua"): f.read_text(encoding="utf-8")
               for f in root.iterdir() if f.name.endswith(".lua")}
    check_includes(include)
    assert "-- @include now" in include["gate"] and "-- @include age" in include["pend"]
    assert all("@include" not in s.source for s in bundle().values())
