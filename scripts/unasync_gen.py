"""Generate echomq/_sync from echomq/_async (the blocking API is derived, never hand-edited).

    python scripts/unasync_gen.py          rewrite src/echomq/_sync/*.py
    python scripts/unasync_gen.py --check  fail if the checked-in copy is out of date (CI)
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "src" / "echomq"
SRC, DST = ROOT / "_async", ROOT / "_sync"

REPLACEMENTS = [
    (r"\bimport redis\.asyncio as redis_client\b", "import redis as redis_client"),
    (r"^import asyncio\n", ""),
    (r"\basyncio\.sleep\b", "time.sleep"),
    (r"\basync def\b", "def"),
    (r"\basync with\b", "with"),
    (r"\basync for\b", "for"),
    (r"\bawait ", ""),
    (r"\bAsyncConnector\b", "Connector"),
    (r"\bAsyncQueue\b", "Queue"),
    (r"\bAsyncUpkeep\b", "Upkeep"),
    (r"\bAsyncClusterConnector\b", "ClusterConnector"),
    (r"\bconnect_async\b", "connect"),
    (r"\becho" r"mq\._async\b", "echomq._sync"),
    (r"\baclose\b", "close"),
    (r"__aenter__", "__enter__"),
    (r"__aexit__", "__exit__"),
    (r"The asyncio implementation\.[^\"]*", "The blocking implementation, generated from echomq/_async."),
]
BANNER = "# Generated from echomq/_async/{name} by scripts/unasync_gen.py. Do not edit.\n"


def convert(name: str, text: str) -> str:
    for pattern, repl in REPLACEMENTS:
        text = re.sub(pattern, repl, text, flags=re.M)
    text = BANNER.format(name=name) + text
    # Renamed classes can change import and __all__ order: let ruff sort them the same way
    # it checks them, so the generated copy is lint-clean by construction.
    ruff = Path(sys.executable).with_name("ruff")
    return subprocess.run(
        [str(ruff), "check", "--select", "I,RUF022", "--fix-only", "--quiet",
         "--stdin-filename", str(DST / name), "-"],
        input=text, capture_output=True, text=True, check=True,
    ).stdout


def main(check: bool) -> int:
    stale = []
    for src in sorted(SRC.glob("*.py")):
        dst = DST / src.name
        want = convert(src.name, src.read_text())
        if dst.exists() and dst.read_text() == want:
            continue
        stale.append(dst)
        if not check:
            DST.mkdir(exist_ok=True)
            dst.write_text(want)
    if check and stale:
        print("out of date (run scripts/unasync_gen.py):", *map(str, stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main("--check" in sys.argv[1:]))
