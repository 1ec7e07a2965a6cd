"""Clock skew: leases live on the server's clock, so a client's clock does not matter, and
a promoted replica's clock moves every in-flight lease by the difference.

Clocks are shifted with Debian's libfaketime (package ``faketime``, installed by
scripts/bootstrap.sh, preloaded with ``FAKETIME``): on consumer processes (wall clock
only; their monotonic clock is left alone, as an NTP step would leave it) and on a
replica's ``valkey-server``.
"""

from __future__ import annotations

import glob
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from echomq import Connector, Queue, Verdict, generate
from echomq.servers.server import EmbeddedValkey
from tests.echomq.invariants import assert_consistent

LIBFAKETIME = next(iter(glob.glob("/usr/lib/*/faketime/libfaketime.so.1")), None)
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(LIBFAKETIME is None,
                       reason="libfaketime not installed (scripts/bootstrap.sh installs faketime as root)"),
]
ROOT = Path(__file__).resolve().parents[2]


def _skewed(offset: str, *cmd: str) -> list[str]:
    """``cmd`` with its wall clock shifted by ``offset`` (``env`` execs: the pid is the command's).
    The monotonic clock is left alone, as an NTP step would leave it."""
    return ["env", f"LD_PRELOAD={LIBFAKETIME}", f"FAKETIME={offset}", "FAKETIME_DONT_FAKE_MONOTONIC=1",
            *cmd]


def _wait(check, limit_s: float = 30.0, what: str = "condition"):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + limit_s
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what}: not reached in {limit_s}s"
        time.sleep(0.02)


def test_faketime_shifts_a_python_clock() -> None:
    out = subprocess.run(_skewed("+300s", sys.executable, "-c", "import time; print(time.time())"),
                         capture_output=True, text=True, check=True)
    assert abs(float(out.stdout) - time.time() - 300) < 5


def test_consumers_300s_ahead_and_behind_reap_nothing_early(valkey_url: str, qname: str) -> None:
    """Jobs three times longer than the lease, kept alive by heartbeats, on two consumers
    whose clocks are 300 s ahead and 300 s behind (each also reaps for the queue): every
    job runs once, none is reaped."""
    raw = redis.Redis.from_url(valkey_url)
    procs = []
    conn = Connector.from_url(valkey_url)
    try:
        for offset in ("+300s", "-300s"):
            procs.append(subprocess.Popen(
                _skewed(offset, sys.executable, "-m", "tests.echomq.worker_proc", valkey_url, qname,
                        "--sleep", "3", "--beat", "100", "--lease", "1000", "--concurrency", "8"),
                cwd=ROOT, stdout=subprocess.PIPE, text=True))
        log = f"testlog:{{{qname}}}"  # worker_proc logs under the queue's hash tag
        _wait(lambda: sum(x.startswith(b"ready") for x in raw.lrange(log, 0, -1)) == 2, what="ready")
        q = Queue(conn, qname)
        jobs = [generate("JOB") for _ in range(16)]
        assert q.enqueue_many([(j, b"") for j in jobs]).count(Verdict.ENQUEUED) == 16
        _wait(lambda: q.stats().done == 16, 60, "every job done")
        starts = [x.decode().split() for x in raw.lrange(log, 0, -1) if x.startswith(b"start")]
        assert sorted(s[1] for s in starts) == sorted(jobs)  # each job started once
        assert {s[2] for s in starts} == {"1"}  # by its first attempt
        assert len({s[3] for s in starts}) == 2  # both skewed consumers ran jobs
        where = assert_consistent(raw, qname)
        for j in jobs:
            assert where[j] == "done"
            assert raw.hget(f"emq:{{{qname}}}:job:{j}", "attempts") == b"1"
            assert raw.hget(f"emq:{{{qname}}}:job:{j}", "failures") in (None, b"0")
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate()
        conn.close()
        raw.close()


class SkewedValkey(EmbeddedValkey):
    """An embedded server whose wall clock is shifted by ``offset`` (faketime)."""

    def __init__(self, offset: str, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.offset = offset

    def _args(self) -> list[str]:
        return _skewed(self.offset, *super()._args())


def _server_ms(r: redis.Redis) -> int:
    secs, micros = r.time()
    return int(secs) * 1000 + int(micros) // 1000


@pytest.fixture
def pair(request: pytest.FixtureRequest) -> Iterator[tuple[EmbeddedValkey, EmbeddedValkey]]:
    primary = EmbeddedValkey().start()
    replica = SkewedValkey(request.param).start()
    try:
        yield primary, replica
    finally:
        replica.cleanup()
        primary.cleanup()


@pytest.mark.parametrize("pair", ["+10s", "-10s"], indirect=True)
def test_a_promoted_replica_with_a_skewed_clock_moves_leases_by_the_skew(
        pair: tuple[EmbeddedValkey, EmbeddedValkey]) -> None:
    primary, replica = pair
    p, r = redis.Redis.from_url(primary.url), redis.Redis.from_url(replica.url)
    conns: list[Connector] = []  # closed at the end: their sockets are this test's
    try:
        skew_ms = _server_ms(r) - _server_ms(p)
        assert abs(abs(skew_ms) - 10_000) < 500, skew_ms
        r.replicaof(primary.host, primary.port)
        _wait(lambda: r.info("replication")["master_link_status"] == "up", what="replica in sync")
        conns.append(Connector.from_url(primary.url))
        q = Queue(conns[-1], "skew")
        job = generate("JOB")
        lease_ms = 15_000
        assert q.enqueue(job, b"") is Verdict.ENQUEUED
        (lease,) = q.claim(1, lease_ms=lease_ms)
        assert p.execute_command("WAIT", 1, 1000) == 1  # the replica has the lease
        _wait(lambda: r.zscore("emq:{skew}:active", job) is not None, 5, "the lease on the replica")
        claimed = time.monotonic()
        # Failover: the replica takes over (REPLICAOF NO ONE), the old primary is gone.
        r.replicaof("NO", "ONE")
        primary.stop()
        deadline = int(r.zscore("emq:{skew}:active", job) or 0)
        assert deadline == lease.deadline_ms  # the deadline was written in the old primary's clock
        left_ms = deadline - _server_ms(r)
        elapsed_ms = (time.monotonic() - claimed) * 1000
        # What is left of the lease on the new primary's clock: the lease, less the time
        # that passed, less the skew.
        measured_shift = lease_ms - elapsed_ms - left_ms
        assert abs(measured_shift - skew_ms) < 500, (measured_shift, skew_ms)
        conns.append(Connector.from_url(replica.url))
        nq = Queue(conns[-1], "skew")
        if skew_ms > 0:
            # Ahead: the lease ends ~10 s early; a reaper on the new primary requeues the job
            # after ~5 s of real time instead of 15.
            reaped = _wait(lambda: nq.reap()[0] == 1 and time.monotonic(), 20, "reap")
            took_ms = (reaped - claimed) * 1000
            assert lease_ms - skew_ms - 1000 < took_ms < lease_ms - skew_ms / 2, took_ms
        else:
            # Behind: the lease lasts ~10 s longer; nothing is reaped at its nominal end.
            time.sleep(max(0.0, (claimed + lease_ms / 1000 + 0.5) - time.monotonic()))
            assert nq.reap() == (0, 0)
        # The holder's next heartbeat renews the lease on the new clock: the skew is gone.
        if skew_ms < 0:
            assert nq.heartbeat(lease, lease_ms=lease_ms) is not None
            assert abs(int(r.zscore("emq:{skew}:active", job) or 0) - _server_ms(r) - lease_ms) < 500
        print(f"skew {skew_ms} ms: lease shifted by {measured_shift:.0f} ms")
    finally:
        for conn in conns:
            conn.close()
        p.close()
        r.close()
