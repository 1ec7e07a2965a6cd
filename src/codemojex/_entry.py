"""The ``codemojex`` console script: a Ctrl-C while the command is still importing exits 130
with one line (the imports run before any handler of the command exists).

The interrupt is recorded as well as raised: a KeyboardInterrupt that lands in a callback
the interpreter runs during an import (a module lock's weakref callback) is handed to
``sys.unraisablehook`` (by default a traceback printed as "Exception ignored") and
swallowed, and the import goes on; the hook here takes it as the interrupt, silently.
Without that the command ran as if never interrupted (``tests/codemojex/test_cli_signals.py`` saw ``play``
start its game, about 1 run in 40 under load). An interrupt the import machinery wraps
(a KeyboardInterrupt raised in ``__set_name__`` becomes a RuntimeError; CI saw its traceback
in 1 run of 20) is still the interrupt: once the handler has run, whatever the import
raised is taken as the interrupt. The command's own handler replaces this one
(``echomq.ops.clikit.Group.main``).
"""

from __future__ import annotations

import signal
import sys
from typing import Any


def main() -> None:
    interrupted = False

    def on_interrupt(signum: int, frame: Any) -> None:
        nonlocal interrupted
        interrupted = True
        raise KeyboardInterrupt

    def unraisable(info: Any) -> None:
        nonlocal interrupted
        if issubclass(info.exc_type, KeyboardInterrupt):
            interrupted = True  # swallowed where it landed: honoured below
        else:
            sys.__unraisablehook__(info)

    sys.unraisablehook = unraisable
    signal.signal(signal.SIGINT, on_interrupt)
    try:
        from codemojex.ops.cli import main as cli
    except BaseException:
        if not interrupted:
            raise
        # The interrupt, raised here or wrapped where it landed: one raised inside a class
        # body's ``__set_name__`` comes out as a RuntimeError (Python 3.11).
    try:
        if interrupted:
            raise KeyboardInterrupt
        cli.main(prog_name="codemojex")
    except KeyboardInterrupt:  # here, or before the command's handler replaced this one
        sys.stderr.write("codemojex: interrupted\n")
        raise SystemExit(130) from None
