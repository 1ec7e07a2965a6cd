"""An embedded server runs in its own session (Ctrl-C reaches only its owner) yet never
outlives an owner that is killed outright."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.procfs import alive

OWNER = ("import time\nfrom echomq.servers.server import EmbeddedValkey\n"
         "s = EmbeddedValkey().start()\nprint(s.pid, s.data_dir, flush=True)\ntime.sleep(120)\n")


def test_the_server_has_its_own_session_and_ends_with_a_killed_owner() -> None:
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None
        pid_text, data_dir = owner.stdout.readline().split()
        pid = int(pid_text)
        assert os.getsid(pid) == pid != os.getsid(owner.pid)  # a session of its own
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        deadline = time.monotonic() + 10
        while alive(pid):
            assert time.monotonic() < deadline, "the server outlived its killed owner"
            time.sleep(0.02)
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        if owner.stdout is not None:
            owner.stdout.close()
    import shutil

    shutil.rmtree(data_dir, ignore_errors=True)  # a killed owner cannot remove its temp folder


AFTER_CLEANUP = """
import os, sys
from echomq.core.errors import ServerUnavailable
from echomq.servers.server import EmbeddedValkey, emergency_stop
data = sys.argv[1]
emergency_stop()  # what an interrupt's cleanup thread runs while the main thread goes on
try:
    EmbeddedValkey(data_dir=data).start()
except ServerUnavailable as exc:
    print("refused:", exc, sorted(os.listdir(data)))
else:
    print("started")
"""


def test_a_start_racing_an_interrupts_cleanup_begins_no_server(tmp_path: Path) -> None:
    """Once the cleanup has run, a start still on its way in another thread is refused
    before it spawns anything: a server begun after the cleanup would write into the
    folder the cleanup removed (seen: a Ctrl-C during ``echomq server``'s start-up left
    the run folder behind, once in three)."""
    data = tmp_path / "data"
    out = subprocess.run([sys.executable, "-c", AFTER_CLEANUP, str(data)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("refused: this process is stopping"), out.stdout
    assert out.stdout.rstrip().endswith("[]")  # nothing written: no server began
