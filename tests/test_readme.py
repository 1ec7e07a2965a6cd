"""The Python examples of the README and of the documents its first screen sends readers
to run as written, against a real server (ECHOMQ_URL)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


# Every document with runnable Python examples; an example moved out of the README keeps
# its test by its document being listed here.
DOCUMENTS = ("README.md", "docs/operating.md")


def _python_blocks(document: str | None = None) -> list[str]:
    return [block for name in ([document] if document else DOCUMENTS)
            for block in re.findall(r"```python\n(.*?)```", (ROOT / name).read_text(), flags=re.S)]


def test_the_readme_shows_one_example_and_the_documents_the_rest() -> None:
    assert len(_python_blocks("README.md")) == 1
    assert len(_python_blocks()) >= 2


def test_every_python_example_runs(valkey_url: str, tmp_path: Path) -> None:
    blocks = _python_blocks()
    for i, code in enumerate(blocks):
        if code.startswith("# hello_tasks.py"):
            continue  # it needs its worker: tests/echomq/tasks/test_examples.py runs it with one
        # A block that names its module (``# orders.py: ...``) is saved under that name.
        named = re.match(r"# (\w+)\.py", code)
        path = tmp_path / (f"{named.group(1)}.py" if named else f"example{i}.py")
        path.write_text(code)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"ECHOMQ_URL": valkey_url}
        done = subprocess.run([sys.executable, "-I", str(path)], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, f"python block {i} of {DOCUMENTS} failed:\n{code}\n{done.stderr}"


def test_the_worker_example_runs_under_echomq_worker(valkey_url: str, tmp_path: Path) -> None:
    (code,) = [b for b in _python_blocks() if b.startswith("# orders.py")]
    (tmp_path / "orders.py").write_text(code)
    from echomq import Connector, Queue, generate

    conn = Connector.from_url(valkey_url)
    q = Queue(conn, f"readme-{os.getpid()}")
    job = generate("JOB")
    q.enqueue(job, b"abc")
    done = subprocess.run([sys.executable, "-c", "from echomq._entry import main; main()", "worker",
                           "orders:handle", "--queue", q.name, "--url", valkey_url, "--burst"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    row = q.job(job)
    conn.close()
    assert row is not None and row["state"] == b"done" and row["result"] == b"ABC"
