"""Processes seen through Linux's ``/proc``, for tests that check what a run left behind.

One reader of ``/proc/<pid>/stat`` for every test: the command name in that file is in
parentheses and may hold spaces or ``)``, so the fields after it are read after the
*last* ``)``; field 3 is the state (``Z`` a zombie: ended, not yet reaped by its
parent), field 4 the parent's pid. A pid whose entry vanishes while it is read is gone.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["alive", "children", "command_line", "parent", "pids", "state", "with_marker"]

PROC = Path("/proc")


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name, or None if it is gone."""
    try:
        return (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def state(pid: int) -> str | None:
    """The process's state letter (``R``, ``S``, ``D``, ``T``, ``Z`` ...), None if it is gone."""
    fields = _stat_fields(pid)
    return fields[0] if fields else None


def parent(pid: int) -> int | None:
    """The pid of the process's parent, None if it is gone."""
    fields = _stat_fields(pid)
    return int(fields[1]) if fields and len(fields) > 1 else None


def command_line(pid: int) -> str | None:
    """The process's arguments joined by spaces, None if it is gone."""
    try:
        return (PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None


def alive(pid: int, command: str | None = None) -> bool:
    """The process runs (it exists and is no zombie) and, if ``command`` is given, its
    command line holds it (a recycled pid is then not taken for ours)."""
    if state(pid) in (None, "Z"):
        return False
    if command is None:
        return True
    line = command_line(pid)
    return line is not None and command in line


def pids() -> list[int]:
    """Every process's pid, this one's included."""
    return [int(e.name) for e in PROC.iterdir() if e.name.isdigit()]


def children(pid: int) -> dict[int, str]:
    """The processes whose parent is ``pid``, with their command lines."""
    found = {}
    for p in pids():
        if parent(p) == pid and (line := command_line(p)) is not None:
            found[p] = line
    return found


def with_marker(marker: str) -> list[int]:
    """Other processes whose command line or working directory names ``marker``."""
    found = []
    for p in pids():
        if p == os.getpid():
            continue
        try:
            cwd = os.readlink(PROC / str(p) / "cwd")
        except OSError:
            continue
        line = command_line(p)
        if line is not None and (marker in line or marker in cwd):
            found.append(p)
    return found
