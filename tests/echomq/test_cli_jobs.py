"""``echomq result|progress|cancel`` (issue 14 items 5-7): the answer on stdout, every other
end one line on stderr with its own exit code, never a traceback."""

from __future__ import annotations

from click.testing import CliRunner

from echomq import Connector, Queue, QueueOptions, generate
from echomq.ops.cli import main


def _invoke(*args: str) -> tuple[int, str, str]:
    got = CliRunner(env={"ECHOMQ_URL": None}).invoke(main, list(args), prog_name="echomq")
    return got.exit_code, got.stdout, got.stderr


def test_result_progress_and_cancel_from_the_command_line(valkey_url: str, qname: str) -> None:
    conn = Connector.from_url(valkey_url)
    q = Queue(conn, qname)
    done, dead, waiting, running = (generate("JOB") for _ in range(4))
    q.enqueue_many([(done, b"1"), (dead, b"2")])
    first, second = q.claim(2, lease_ms=60_000)
    q.report_progress(first, b"90%")
    q.complete(first, b'{"total": 3}')
    Queue(conn, qname, options=QueueOptions(max_attempts=1)).retry(second, delay_ms=0,
                                                                    error="KeyError: 'x'")
    q.enqueue(running, b"3")
    (lease,) = q.claim(1, lease_ms=60_000)
    q.admit(waiting, b"4", delay_ms=3_600_000)
    url = ("--url", valkey_url)
    try:
        assert _invoke("result", qname, done, *url)[:2] == (0, '{"total": 3}\n')
        code, out, err = _invoke("result", qname, dead, *url)
        assert (code, out) == (1, "") and err.strip() == "dead: KeyError: 'x'"
        code, out, err = _invoke("result", qname, running, "--timeout", "0.2", *url)
        assert code == 3 and "not ended within 0.2 s (it is active)" in err
        code, _, err = _invoke("result", qname, generate("JOB"), *url)
        assert code == 4 and "no such job" in err and "Traceback" not in err
        code, out, _ = _invoke("progress", qname, done, *url)
        assert code == 0 and out.strip() == f"{done}: done, progress 90%"
        code, out, _ = _invoke("cancel", qname, waiting, running, done, *url)
        assert code == 0 and out.splitlines() == [
            f"{waiting}: cancelled", f"{running}: asked to stop",
            f"{done}: left as it is (ended, or unknown)"]
        assert _invoke("result", qname, waiting, *url)[0] == 2
        assert q.complete(lease).value == "cancelled"
        code, out, err = _invoke("cancel", qname, "not-an-id", *url)
        assert code != 0 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    finally:
        conn.close()
