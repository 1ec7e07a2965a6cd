"""Exactly one job per tick with three scheduler processes, one of them killed -9.

Three processes (tests/echomq/schedule_proc.py, the blocking API) run the same 50 ms
catch-up schedule against the same queue, on the single server and on the local 3+3
cluster. After some ticks one is killed with SIGKILL; the other two go on. Over at
least 200 ticks: every tick from the first to the last has exactly one job, no tick was
reported admitted by two processes, and both the killed process (before) and the
survivors (after) did admit ticks.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import redis

from echomq import Schedule, tick_of
from tests.conftest import keys_of

ROOT = Path(__file__).resolve().parents[2]
EVERY_MS = 50
TICKS = 200


class Child:
    """One scheduler process and the lines it printed (read by a thread)."""

    def __init__(self, url: str, queue: str) -> None:
        env = os.environ | {"PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.echomq.schedule_proc", url, queue, str(EVERY_MS)],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    @property
    def fired(self) -> list[int]:
        return [int(x.split()[1]) for x in list(self.lines) if x.startswith("fired ")]

    def ready(self) -> bool:
        return "ready" in self.lines


def _wait(what: str, cond: object, seconds: float, children: list[Child]) -> None:
    deadline = time.monotonic() + seconds
    while not cond():  # type: ignore[operator]
        for c in children:
            assert c.proc.poll() in (None, -signal.SIGKILL), f"a scheduler exited: {c.lines[-5:]}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)  # a bounded poll for the condition


def _ticks(raw: redis.Redis, queue: str) -> list[int]:
    return sorted(tick_of(k.split(":job:")[1]) for k in keys_of(raw, queue) if ":job:" in k)


@pytest.mark.timeout(400)
def test_three_schedulers_one_killed_admit_each_of_200_ticks_exactly_once(
        backend_url: str, qname: str, raw: redis.Redis) -> None:
    children = [Child(backend_url, qname) for _ in range(3)]
    try:
        _wait("three ready schedulers", lambda: all(c.ready() for c in children), 180, children)
        start = len(_ticks(raw, qname))
        _wait("60 ticks", lambda: len(_ticks(raw, qname)) >= start + 60, 120, children)
        victim, survivors = children[0], children[1:]
        victim.proc.kill()  # SIGKILL, by the PID we started
        victim.proc.wait(30)
        victim.reader.join(10)
        at_kill = len(_ticks(raw, qname))
        _wait(f"{TICKS} ticks", lambda: len(_ticks(raw, qname)) >= max(TICKS, at_kill + 60) + 5,
              240, children)
        for c in survivors:
            c.proc.send_signal(signal.SIGTERM)
        for c in survivors:
            assert c.proc.wait(60) == 0, c.lines[-5:]
            c.reader.join(10)
    finally:
        for c in children:
            if c.proc.poll() is None:
                c.proc.kill()
                c.proc.wait(30)
            c.reader.join(10)
            assert c.proc.stdout is not None
            c.proc.stdout.close()
    ticks = _ticks(raw, qname)
    assert len(ticks) >= TICKS
    # every tick from the first to the last has its job: none skipped ...
    assert ticks == list(range(ticks[0], ticks[-1] + 1, EVERY_MS))
    s = Schedule(name="tick", queue=qname, every_ms=EVERY_MS)
    assert {k for k in keys_of(raw, qname) if ":job:" in k} == {
        f"emq:{{{qname}}}:job:{s.job_id(t)}" for t in ticks}
    # ... and none admitted twice: no tick reported by two processes (or twice by one)
    reported = [t for c in children for t in c.fired]
    assert len(reported) == len(set(reported)), "a tick was admitted twice"
    assert set(reported) <= set(ticks)
    # the killed scheduler worked before its kill, the survivors after it; a kill -9 may
    # lose the report line of the victim's last admissions (never the admission itself)
    kill_tick = ticks[min(at_kill, len(ticks)) - 1]
    assert victim.fired and all(t <= kill_tick for t in victim.fired)
    assert any(t > kill_tick for c in survivors for t in c.fired)
    assert len(set(ticks) - set(reported)) <= 3
    assert raw.zcard(f"emq:{{{qname}}}:pending") == len(ticks)
