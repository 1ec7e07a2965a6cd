"""Generate the blocking code and its tests from the asyncio ones (after httpcore's unasync.py).

    python scripts/unasync_gen.py          rewrite every generated tree
    python scripts/unasync_gen.py --check  fail if a checked-in copy is out of date (CI)

Two trees are written once for asyncio and generated for the blocking API:

    src/echomq/client/_async/*.py  ->  src/echomq/client/_sync/*.py  the library
    tests/echomq/_async/*.py  ->  tests/echomq/_sync/*.py   its API tests, so both
                                                            APIs run the same assertions

Every substitution rule must fire in at least one file: a rule that never fires is dead
(its source was renamed or removed, and the rule could hide a later mistake), and the
generator fails naming it, in both modes. A generated file with no source left is
reported as stale too (and removed when writing).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TREES = [
    (ROOT / "src" / "echomq" / "client" / "_async", ROOT / "src" / "echomq" / "client" / "_sync"),
    (ROOT / "tests" / "echomq" / "_async", ROOT / "tests" / "echomq" / "_sync"),
]

REPLACEMENTS = [
    (r"\bimport redis\.asyncio as redis_client\b", "import redis as redis_client"),
    (r"^import asyncio\n", ""),
    (r"\basyncio\.sleep\b", "time.sleep"),
    (r"\basync def\b", "def"),
    (r"\basync with\b", "with"),
    (r"\bawait ", ""),
    (r"\bAsyncConnector\b", "Connector"),
    (r"\bAsyncQueue\b", "Queue"),
    (r"\bAsyncShardedQueue\b", "ShardedQueue"),
    (r"\bAsyncUpkeep\b", "Upkeep"),
    (r"\bAsyncAdmission\b", "Admission"),
    (r"\bAsyncScheduler\b", "Scheduler"),
    (r"\bAsyncClusterConnector\b", "ClusterConnector"),
    (r"\bAsyncWire\b", "Wire"),
    (r"\bAsyncStream\b", "Stream"),
    (r"\bAsyncIterator\b", "Iterator"),
    (r"\bconnect_async\b", "connect"),
    (r"\becho" r"mq\.client\._async\b", "echomq.client._sync"),
    (r"\btests\.echo" r"mq\._async\b", "tests.echomq._sync"),
    (r"\baclose\b", "close"),
    (r"\b(fan_out(?:_each)?)_async\b", r"\1"),
    (r"__aenter__", "__enter__"),
    (r"__aexit__", "__exit__"),
    (r"The asyncio implementation\.[^\"]*",
     "The blocking implementation, generated from echomq/client/_async."),
    (r"The asyncio API tests\.[^\"]*", "The blocking API tests, generated from tests/echomq/_async."),
]
BANNER = "# Generated from {source} by scripts/unasync_gen.py. Do not edit.\n"


class DeadRule(Exception):
    """A substitution rule that fired in no file."""


def convert(src: Path, dst: Path, text: str, fired: list[int]) -> str:
    """The generated text of ``src`` (written at ``dst``); counts each rule's hits in ``fired``."""
    for i, (pattern, repl) in enumerate(REPLACEMENTS):
        text, hits = re.subn(pattern, repl, text, flags=re.M)
        fired[i] += hits
    text = BANNER.format(source=src.relative_to(ROOT).as_posix().removeprefix("src/")) + text
    # Renamed classes can change import and __all__ order, and an `async with` around a
    # `with` becomes two nested `with`s: let ruff fix both the way it checks them, so the
    # generated copy is lint-clean by construction.
    ruff = Path(sys.executable).with_name("ruff")
    return subprocess.run(
        [str(ruff), "check", "--select", "I,RUF022,SIM117", "--fix-only", "--quiet",
         "--stdin-filename", str(dst), "-"],
        input=text, capture_output=True, text=True, check=True,
    ).stdout


def generate() -> dict[Path, str | None]:
    """Every generated file and its wanted text (None: no source left, remove it).

    Raises :class:`DeadRule` when a rule fired nowhere."""
    fired = [0] * len(REPLACEMENTS)
    want: dict[Path, str | None] = {}
    for src_dir, dst_dir in TREES:
        for src in sorted(src_dir.glob("*.py")):
            dst = dst_dir / src.name
            want[dst] = convert(src, dst, src.read_text(), fired)
        for old in sorted(dst_dir.glob("*.py")):
            want.setdefault(old, None)
    dead = [pattern for (pattern, _), hits in zip(REPLACEMENTS, fired, strict=True) if not hits]
    if dead:
        raise DeadRule("substitution rules that never fire (remove them): " + ", ".join(dead))
    return want


def main(check: bool) -> int:
    try:
        want = generate()
    except DeadRule as exc:
        print(exc, file=sys.stderr)
        return 1
    stale = []
    for dst, text in want.items():
        current = dst.read_text() if dst.exists() else None
        if current == text:
            continue
        stale.append(dst)
        if check:
            continue
        if text is None:
            dst.unlink()
        else:
            dst.parent.mkdir(exist_ok=True)
            dst.write_text(text)
    if check and stale:
        print("out of date (run scripts/unasync_gen.py):", *map(str, stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main("--check" in sys.argv[1:]))
