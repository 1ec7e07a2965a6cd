"""Flows under kill -9 (decision 0038), on one server and on the 3+3 cluster: 200 flows of
1-50 children over two queues on different cluster slots, drained by three consumer
processes and one relay-only process, one of which is killed with SIGKILL (and restarted)
every 0.2-0.6 s. At the end every parent has been released exactly once (its row's
``released``, counted by the server) and only after all of its children ended (checked by the
handler that runs the parent), or failed by its policy; no parent waits, no notice is left."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from echomq import AsyncQueue, generate
from tests.echomq.test_flows import other_slot

ROOT = Path(__file__).resolve().parents[2]
FLOWS = 200


def _spawn(url: str, a: str, b: str, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "tests.echomq.flow_worker_proc", url, a, b, *extra],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_every_parent_released_exactly_once_under_kill_9(
        conn: Any, backend_url: str, qname: str) -> None:
    rng = random.Random(27)
    a, b = qname, other_slot(qname)
    qa = AsyncQueue(conn, a)
    parents: dict[str, tuple[str, str, list[tuple[str, str, bytes]]]] = {}
    for _ in range(FLOWS):
        home = rng.choice((a, b))
        pid = generate("JOB")
        kids = [(rng.choice((a, b)), generate("JOB"), b"F" if rng.random() < 0.03 else b"c")
                for _ in range(rng.randint(1, 50))]
        policy = rng.choice(("fail", "continue", "ignore"))
        assert await AsyncQueue(conn, home).admit_flow(parent=(pid, b"P"), children=kids,
                                                       on_child_failure=policy)
        parents[pid] = (home, policy, kids)
    children = sum(len(k) for _, _, k in parents.values())
    procs = [_spawn(backend_url, a, b) for _ in range(3)] + [_spawn(backend_url, a, b, "--relay-only")]
    kills = 0
    try:
        deadline = time.monotonic() + 240
        while True:
            states = {pid: await _state(conn, home, pid) for pid, (home, _, _) in parents.items()}
            if all(s in ("done", "dead") for s in states.values()):
                break
            counts = {s: list(states.values()).count(s) for s in set(states.values())}
            assert time.monotonic() < deadline, counts
            time.sleep(rng.uniform(0.2, 0.6))  # noqa: ASYNC251 (the consumers are other processes)
            i = rng.randrange(len(procs))
            procs[i].send_signal(signal.SIGKILL)
            procs[i].wait()
            kills += 1
            procs[i] = _spawn(backend_url, a, b, *(["--relay-only"] if i == 3 else []))
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    early = [x for x in await conn.command("LRANGE", f"testlog:{{{a}}}", 0, -1) if x.startswith(b"early")]
    released = failed = 0
    for pid, (home, policy, kids) in parents.items():
        row = await AsyncQueue(conn, home).job(pid)
        assert row is not None
        n = int(row.get("released", b"0"))
        assert n <= 1, (pid, row)  # zero doubles
        if row["state"] == b"dead" and n == 0:  # failed by its policy, never released
            assert policy == "fail" and int(row["failed"]) >= 1, (pid, row)
            failed += 1
        else:
            assert n == 1 and int(row["settled"]) == len(kids), (pid, row)
            released += 1
    for name in (a, b):
        assert await conn.command("HLEN", f"emq:{{{name}}}:finished") == 0
        assert await conn.command("ZCARD", f"emq:{{{name}}}:waiting") == 0
    assert early == []
    assert kills >= 10
    print(f"\nflows {FLOWS}, children {children}, kills {kills}, released {released}, "
          f"failed by policy {failed}, doubles 0, early 0")
    await qa.fence()


async def _state(conn: Any, queue: str, job_id: str) -> str:
    row = await AsyncQueue(conn, queue).job(job_id)
    return row["state"].decode() if row else "gone"
