"""An embedded PostgreSQL ends with its owner, even one killed with kill -9.

pg_ctl starts the postmaster in its own session, so nothing in the kernel ties it to
the process that asked for it; ``PgServer`` starts an owner watch that ends it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.procfs import alive

CHILD = r"""
import sys, time
from codemojex.infra.pg import PgServer
server = PgServer(data_dir=sys.argv[1]) if sys.argv[1] else PgServer()
server.start()
print(server._pgdata, flush=True)
time.sleep(600)
"""


def _postmaster(pgdata: Path) -> int:
    return int((pgdata / "postmaster.pid").read_text().split()[0])


@pytest.mark.timeout(120)
@pytest.mark.parametrize("named", [False, True], ids=["temporary", "named"])
def test_kill_9_of_the_owner_ends_its_postgres(named: bool) -> None:
    # A named data folder outside pytest's temporary tree (which may be readable by root
    # only: the embedded server runs as its own system user).
    base = Path(tempfile.mkdtemp(prefix="codemojex-pgtest-")) if named else None
    data = base / "pgdata" if base else None
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(data or "")],
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    with child.stdout:
        pgdata = Path(child.stdout.readline().strip())
    pid = _postmaster(pgdata)
    assert alive(pid)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (alive(pid) or (not named and pgdata.exists())):
        time.sleep(0.05)
    still = alive(pid)
    if still:  # this test's own server: never leave it behind
        os.kill(pid, signal.SIGQUIT)
    assert not still, "the postmaster outlived its killed owner"
    if named:
        assert (pgdata / "PG_VERSION").exists(), "a named data directory is kept"
        shutil.rmtree(base or pgdata, ignore_errors=True)
    else:
        assert not pgdata.exists(), "a temporary data directory is removed"


def test_a_stopped_server_leaves_no_watch_behind() -> None:
    from codemojex.infra.pg import PgServer

    server = PgServer()  # a temporary data folder of its own (pytest's may be root-only)
    server.start()
    watch = server._watch
    assert watch is not None and watch.poll() is None
    server.stop()
    assert watch.poll() is not None and server._watch is None
