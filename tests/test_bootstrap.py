"""The setup scripts wait for the system package lock instead of failing on it: two
bootstraps at once (``play.sh`` in one checkout, ``test.sh`` in another) meet at apt's
lock, and every ``apt-get`` they run waits for it (``DPkg::Lock::Timeout``)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted([*ROOT.glob("scripts/*.sh"), *ROOT.glob("bench/*.sh")])
CALL = re.compile(r"\bapt-get\s+(?!>)(.*)")


def _calls_without_the_wait(text: str) -> list[str]:
    """Each ``apt-get`` run (not a mention in a comment or a ``command -v``) that does not
    pass the lock timeout, itself or through ``"${apt_wait[@]}"``."""
    out = []
    for line in text.splitlines():
        code = line.split("#", 1)[0]
        if "command -v apt-get" in code:
            continue
        for m in CALL.finditer(code):
            if "DPkg::Lock::Timeout" not in m.group(1) and "${apt_wait[@]}" not in m.group(1):
                out.append(line.strip())
    return out


def test_every_apt_get_waits_for_the_package_lock() -> None:
    assert any(p.name == "bootstrap.sh" for p in SCRIPTS)
    hits = {p.name: _calls_without_the_wait(p.read_text()) for p in SCRIPTS}
    assert {name: lines for name, lines in hits.items() if lines} == {}
    assert "apt_wait=(-o DPkg::Lock::Timeout=600)" in (ROOT / "scripts" / "bootstrap.sh").read_text()


def test_a_call_without_the_wait_is_found() -> None:
    assert _calls_without_the_wait("(apt-get update -qq && apt-get install -y x) >/dev/null") == [
        "(apt-get update -qq && apt-get install -y x) >/dev/null"]
    assert _calls_without_the_wait('apt-get "${apt_wait[@]}" install -y x') == []
    assert _calls_without_the_wait("apt-get -o DPkg::Lock::Timeout=600 update -qq") == []
    assert _calls_without_the_wait("# apt-get update, in a comment") == []
    assert _calls_without_the_wait("if command -v apt-get >/dev/null; then") == []
