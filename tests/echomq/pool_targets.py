"""Blocking handlers the process-pool tests run by path (``tests.echomq.pool_targets:...``).

Each takes a JSON payload naming a folder of its test; it appends one line per attempt to
``runs`` there (``pid attempt others``: ``others`` lists the pids of earlier attempts and
whether each still existed when this attempt started), so a test reads what ran, where,
and what was still alive, from outside the processes.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import subprocess
import time
from pathlib import Path

from echomq import Lease


def _record(lease: Lease) -> dict[str, object]:
    args = json.loads(lease.payload)
    runs = Path(args["dir"]) / "runs"
    earlier = [int(line.split()[0]) for line in runs.read_text().splitlines()] if runs.exists() else []
    others = ",".join(f"{pid}:{'alive' if _alive(pid) else 'gone'}" for pid in earlier) or "-"
    with runs.open("a") as f:
        f.write(f"{os.getpid()} {lease.attempt} {others}\n")
    return dict(args)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def hold_gil(lease: Lease) -> dict[str, int]:
    """Holds the GIL for ``seconds`` (libc ``sleep`` called through ``PyDLL``, which does not
    release it), then a pure-Python busy loop as long again; answers its pid."""
    args = _record(lease)
    seconds = int(str(args["seconds"]))
    ctypes.PyDLL(None).sleep(seconds)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return {"pid": os.getpid()}


def forever(lease: Lease) -> None:
    """Never returns: a pure-Python busy loop that ignores SIGTERM (only SIGKILL stops it)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _record(lease)
    while True:
        pass


def forever_noting_term(lease: Lease) -> None:
    """Never returns: a pure-Python busy loop; a SIGTERM is noted (the file ``term`` appears)
    and ignored, so only SIGKILL stops it (a test sees the kill begin)."""
    args = json.loads(lease.payload)
    term = Path(str(args["dir"])) / "term"
    signal.signal(signal.SIGTERM, lambda *_: term.touch())  # before anything can time out
    _record(lease)
    while True:
        pass


def spawns_then_hangs(lease: Lease) -> None:
    """Starts a ``sleep`` of its own (its pid in ``grandchild``), then never returns."""
    args = _record(lease)
    proc = subprocess.Popen(["sleep", "600"])
    (Path(str(args["dir"])) / "grandchild").write_text(str(proc.pid))
    while True:
        pass


def crash_first(lease: Lease) -> bytes:
    """Attempt 1 ends its own process (``how``: SIGKILL, SIGSEGV or exit; ``none``: it does
    not); later ones answer."""
    args = _record(lease)
    if lease.attempt == 1 and args["how"] != "none":
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a SIGSEGV writes no core file
        if args["how"] == "exit":
            os._exit(3)
        os.kill(os.getpid(), getattr(signal, str(args["how"])))
    return f"survived {os.getpid()}".encode()


def pid(lease: Lease) -> dict[str, int]:
    """Answers the pid of the process it ran in."""
    return {"pid": os.getpid()}


def fails(lease: Lease) -> None:
    """Raises: an ordinary failed attempt, its text carried back from the child."""
    raise ValueError(f"no good: {lease.id}")
