"""The outbox under faults: the relay killed (SIGKILL) at every step, PostgreSQL restarted
under a running relay, Valkey at its memory limit. Every committed row becomes exactly one
job; nothing is lost, nothing admitted twice. Real PostgreSQL, real Valkey, the relay as the
``echomq relay`` process an operator runs.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import redis

from codemojex.infra.pg import PgServer
from echomq import AsyncConnector, AsyncQueue, Verdict, generate
from echomq.outbox import CRASH_POINTS, Outbox, OutboxRelay
from echomq.servers.server import EmbeddedValkey
from tests.echomq._async.support import wait_for
from tests.echomq.outbox.conftest import fresh_database
from tests.echomq.outbox.scenario import ROOT, client, commit_rows, crash_run, outbox_rows, payloads_on
from tests.echomq.test_memory_limit import fill

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_relay_killed_at_any_step_admits_each_committed_row_once(
        outbox_pg: PgServer, backend_url: str, backend: str, qname: str, point: str) -> None:
    run = crash_run(fresh_database(outbox_pg.url), backend_url, qname, point)
    assert run.exit_code == -signal.SIGKILL
    # what the killed relay had admitted: nothing before admitting, half of its first batch
    # mid-admission, its whole first batch (64 rows) from then on
    assert run.jobs_after_kill == {"claimed": 0, "admitting": 32}.get(point, 64)
    assert run.jobs_after_rerun == 200 and run.admitted_twice == 0
    # the rows that came back were refused as duplicates, never admitted again
    duplicates = {"claimed": 0, "admitting": 32, "committed": 0}.get(point, 64)
    assert f"duplicates={duplicates} " in run.rerun_line, run.rerun_line


@pytest.fixture
def own_pg() -> Iterator[PgServer]:
    """A PostgreSQL of this test's own, in a data folder that survives its restarts."""
    with tempfile.TemporaryDirectory(prefix="outbox-pg-") as tmp:
        server = PgServer(data_dir=Path(tmp) / "pgdata")
        server.start()
        try:
            yield server
        finally:
            server.stop()


def _relay(database_url: str, valkey_url: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ECHOMQ_URL", "ECHOMQ_RELAY_CRASH_AT")}
    env["PYTHONPATH"] = str(ROOT / "src")
    return subprocess.Popen(
        [sys.executable, "-c", "from echomq._entry import main; main()", "relay", "--database-url",
         database_url, "--url", valkey_url, "--poll", "0.2", "--batch", "50"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


async def test_a_postgres_restart_under_a_running_relay_loses_and_repeats_nothing(
        own_pg: PgServer, valkey_url: str, qname: str) -> None:
    url = fresh_database(own_pg.url)
    raw = client(valkey_url)
    relay = _relay(url, valkey_url)
    try:
        first = commit_rows(url, qname, 150)

        async def count(n: int) -> bool:
            assert relay.poll() is None, relay.communicate()
            return len(payloads_on(raw, qname)) >= n

        await wait_for(lambda: count(150), within=30)
        # rows committed, then the server crashes (every backend, the relay's included, dies
        # mid-whatever) and recovers from its WAL while the relay reconnects
        second = [b"b" + x for x in commit_rows(url, qname + "b", 150)]
        own_pg.restart(mode="immediate")
        third = commit_rows(url, qname + "c", 150)
        await wait_for(lambda: _all_on(raw, (qname, qname + "b", qname + "c"), 450), within=60)
        assert outbox_rows(url) == 0
    finally:
        relay.send_signal(signal.SIGTERM)
        relay.communicate(timeout=30)
    found = payloads_on(raw, qname)
    assert sorted(found) == sorted(first)
    assert sorted(b"b" + x for x in payloads_on(raw, qname + "b")) == sorted(second)
    assert sorted(payloads_on(raw, qname + "c")) == sorted(third)
    raw.close()


async def _all_on(raw: redis.Redis, queues: tuple[str, ...], n: int) -> bool:
    return sum(len(payloads_on(raw, q)) for q in queues) == n


async def test_rows_wait_while_valkey_is_at_its_memory_limit_and_arrive_once_after(
        outbox_pg: PgServer, qname: str) -> None:
    url = fresh_database(outbox_pg.url)
    with EmbeddedValkey(extra={"maxmemory": "4mb", "maxmemory-policy": "noeviction"}) as server:
        conn = AsyncConnector.from_url(server.url)
        raw = redis.Redis.from_url(server.url)
        filler = AsyncQueue(conn, qname + "-filler")
        try:
            await fill(filler)  # 1 KiB jobs until the server refuses every admission
            expected = commit_rows(url, qname, 40)
            relay = OutboxRelay(url, conn, poll_s=0.2)
            stop = asyncio.Event()
            task = asyncio.create_task(relay.run(stop))
            try:
                await wait_for(lambda: _waited(relay), within=20)
                assert payloads_on(raw, qname) == [] and outbox_rows(url) == 40  # rows wait
                for key in raw.scan_iter(match=f"emq:{{{qname}-filler}}:*", count=1000):
                    raw.delete(key)  # memory comes back: the running relay goes on by itself

                async def arrived() -> bool:  # the relay's own count too: it is told last
                    return (len(payloads_on(raw, qname)) == 40 and outbox_rows(url) == 0
                            and relay.totals.admitted == 40)

                await wait_for(arrived, within=30)
            finally:
                stop.set()
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                await relay.aclose()
            assert sorted(payloads_on(raw, qname)) == sorted(expected)
            assert relay.totals.duplicates == 0 and relay.totals.admitted == 40
            assert await AsyncQueue(conn, qname).enqueue(generate("JOB"), b"y") is Verdict.ENQUEUED
        finally:
            raw.close()
            await conn.aclose()


async def _waited(relay: OutboxRelay) -> bool:
    return relay.totals.waiting >= 40


def test_outbox_module_reaches_its_rows(outbox_pg: PgServer) -> None:
    """The fault tests' helpers see what they count (a scenario that counted nothing would pass)."""
    url = fresh_database(outbox_pg.url)
    commit_rows(url, "probe", 3)
    assert outbox_rows(url) == 3
    with psycopg.connect(url) as db:
        Outbox().install(db)  # idempotent on an installed outbox
    assert outbox_rows(url) == 3
