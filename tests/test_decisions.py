"""Every decision record says where it stands: its first line after the title is
``Status: accepted``, ``Status: accepted; amended by NNNN ...`` or
``Status: superseded by NNNN``, and a decision it names is in the folder."""

from __future__ import annotations

import re
from pathlib import Path

DECISIONS = Path(__file__).resolve().parents[1] / "docs" / "decisions"
MISSING = "'Status: accepted' / 'Status: superseded by NNNN'"
STATUS = re.compile(r"^Status: (accepted|superseded by (\d{4}))\b")


def _status(path: Path) -> str:
    lines = path.read_text(encoding="utf-8").splitlines()
    body = [line for line in lines[1:] if line.strip()]
    return body[0] if body else ""


def _problems(paths: list[Path]) -> list[str]:
    numbers = {p.name[:4] for p in paths}
    out = []
    for path in paths:
        status = _status(path)
        m = STATUS.match(status)
        if not m:
            out.append(f"{path.name}: no {MISSING} line under the title")
            continue
        linked = re.search(r"(amended|superseded) by", status)
        named = set(re.findall(r"\b(\d{4})\b", status)) if linked else set()
        out += [f"{path.name}: names decision {n}, which is not in docs/decisions" for n in named - numbers]
    return out


def test_every_decision_has_a_status_line() -> None:
    paths = sorted(DECISIONS.glob("[0-9][0-9][0-9][0-9]-*.md"))
    assert len(paths) >= 28
    assert _problems(paths) == []


def test_a_missing_or_dangling_status_is_found(tmp_path: Path) -> None:
    (tmp_path / "0001-a.md").write_text("# 0001 · a\n\n## Context\n")
    (tmp_path / "0002-b.md").write_text("# 0002 · b\n\nStatus: superseded by 0009.\n")
    (tmp_path / "0003-c.md").write_text("# 0003 · c\n\nStatus: accepted; amended by 0002.\n")
    assert _problems(sorted(tmp_path.iterdir())) == [
        f"0001-a.md: no {MISSING} line under the title",
        "0002-b.md: names decision 0009, which is not in docs/decisions",
    ]
