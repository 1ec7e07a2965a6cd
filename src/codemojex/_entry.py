"""The ``codemojex`` console script: a Ctrl-C while the command is still importing exits
130 with one line (the imports run before any handler of the command exists)."""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from codemojex.ops.cli import main as cli
    except KeyboardInterrupt:
        sys.stderr.write("codemojex: interrupted\n")
        raise SystemExit(130) from None
    cli.main(prog_name="codemojex")
