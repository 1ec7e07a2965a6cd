"""Per-test CPU, for finding where the suite's time goes (off unless ``ECHOMQ_TEST_CPU`` is set).

``ECHOMQ_TEST_CPU=DIR .venv/bin/pytest ...`` writes one JSON line per test to
``DIR/<worker>.jsonl``: the test's id, its start (Unix time), its wall time and the CPU
seconds (user + system) spent meanwhile by the test process, every process below it
(embedded servers, worker children; ended ones through their parent's reaped-children
counters) and the session's PostgreSQL server (its postmaster runs in a session of its own,
outside that tree).
CPU is the honest measure on a shared machine: other sessions' load stretches wall time,
not the CPU a test costs. ``python scripts/suite_cpu.py DIR`` sums and ranks the lines.
A session-wide server's start counts to the first test that needs it.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Generator
from pathlib import Path

import pytest

_DIR = os.environ.get("ECHOMQ_TEST_CPU")
_TICK = os.sysconf("SC_CLK_TCK")
_pgdata: list[Path] = []


def track_pgdata(path: Path | None) -> None:
    """Count the postmaster of this data directory (and its backends) to the tests."""
    if _DIR and path is not None:
        _pgdata.append(path)


def _table() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, CPU ticks of the process and its reaped children)."""
    rows: dict[int, tuple[int, int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # after the name: state ppid ... utime(12) stime(13) cutime(14) cstime(15)
        rows[int(entry.name)] = (int(fields[1]), sum(int(x) for x in fields[11:15]))
    return rows


def _roots() -> list[int]:
    roots = [os.getpid()]
    for data in _pgdata:
        with contextlib.suppress(OSError, ValueError, IndexError):
            roots.append(int((data / "postmaster.pid").read_text().split()[0]))
    return roots


def cpu_ticks() -> int:
    """CPU ticks of this process's tree and the tracked postmasters' trees."""
    rows = _table()
    below: dict[int, list[int]] = {}
    for pid, (ppid, _) in rows.items():
        below.setdefault(ppid, []).append(pid)
    total, seen, todo = 0, set(), _roots()
    while todo:
        pid = todo.pop()
        if pid in seen or pid not in rows:
            continue
        seen.add(pid)
        total += rows[pid][1]
        todo.extend(below.get(pid, ()))
    return total


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    if not _DIR:
        yield
        return
    start, t0, c0 = time.time(), time.monotonic(), cpu_ticks()
    yield
    wall, cpu = time.monotonic() - t0, (cpu_ticks() - c0) / _TICK
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    Path(_DIR).mkdir(parents=True, exist_ok=True)
    with open(Path(_DIR) / f"{worker}.jsonl", "a") as f:
        f.write(json.dumps({"id": item.nodeid, "start": round(start, 2), "wall": round(wall, 3),
                            "cpu": round(cpu, 2),
                            "worker": worker,
                            "marks": sorted(m for m in ("slow", "cluster") if item.get_closest_marker(m))})
                + "\n")
