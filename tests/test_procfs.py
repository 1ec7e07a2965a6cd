"""The shared ``/proc`` reader of the tests (tests/procfs.py) on real processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable

from tests import procfs

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)", "procfs-marker"]


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_a_running_child_is_alive_with_its_command_and_parent() -> None:
    child = subprocess.Popen(SLEEPER)
    try:
        # Popen returns after the fork; the command line is the child's own once it execs
        _until(lambda: "procfs-marker" in (procfs.command_line(child.pid) or ""),
               "the child never ran its command")
        assert procfs.alive(child.pid) and procfs.alive(child.pid, "procfs-marker")
        assert not procfs.alive(child.pid, "valkey-server")
        assert procfs.parent(child.pid) == os.getpid() and procfs.state(child.pid) in {"R", "S", "D"}
        assert "procfs-marker" in procfs.children(os.getpid())[child.pid]
        assert os.getpid() in procfs.pids() and procfs.with_marker("procfs-marker") == [child.pid]
    finally:
        child.kill()
        child.wait()


def test_a_zombie_is_not_alive_and_a_reaped_child_is_gone() -> None:
    child = subprocess.Popen(SLEEPER)
    child.kill()
    _until(lambda: procfs.state(child.pid) == "Z", "the killed child never became a zombie")
    assert not procfs.alive(child.pid) and procfs.parent(child.pid) == os.getpid()
    child.wait()
    assert procfs.state(child.pid) is None and procfs.command_line(child.pid) is None
    assert not procfs.alive(child.pid) and child.pid not in procfs.children(os.getpid())
