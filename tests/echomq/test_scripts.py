from __future__ import annotations

import pytest

from echomq import ScriptContractError
from echomq.protocol.scripts import bundle, load, parse

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
    assert s.keys[:2] == ("job", "pending") and s.argv == ("id", "payload")
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
