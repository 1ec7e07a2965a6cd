"""``echomq dashboard``: serves, stops on SIGINT with exit 0, and an expected failure is one
line and a non-zero exit, never a traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

from echomq.servers.server import free_port

CMD = [sys.executable, "-c", "from echomq.ops.cli import main; main()", "dashboard"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CMD, *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "ECHOMQ_URL": "", "ECHOMQ_DASHBOARD_TOKEN": ""})


def test_an_unreachable_server_is_one_line_and_a_non_zero_exit() -> None:
    t0 = time.monotonic()
    out = _run("--url", f"redis://127.0.0.1:{free_port()}", "--port", str(free_port()))
    assert out.returncode != 0 and time.monotonic() - t0 < 30
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert out.stderr.startswith("echomq: error: cannot reach the server"), out.stderr


def test_bad_options_are_one_line_each(valkey_url: str) -> None:
    for args, says in ((["--url", valkey_url, "--token", "short"], "at least 8 characters"),
                       ([], "give --url or set ECHOMQ_URL"),
                       (["--url", valkey_url, "--port", "0"], "0 is not in the range")):
        out = _run(*args)
        assert out.returncode != 0 and says in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_it_serves_then_stops_on_sigint(valkey_url: str) -> None:
    port = free_port()
    with subprocess.Popen([*CMD, "--url", valkey_url, "--port", str(port), "--read-only"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as resp:
                        assert resp.status == 200 and "read-only" in resp.read().decode()
                        break
                except (urllib.error.URLError, ConnectionError):
                    assert proc.poll() is None, proc.communicate()
                    assert time.monotonic() < deadline, "the dashboard did not answer within 60 s"
                    time.sleep(0.1)
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)
            assert proc.returncode == 0, err
            assert f"EchoMQ dashboard on http://127.0.0.1:{port}/" in out and "(read-only)" in out
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
