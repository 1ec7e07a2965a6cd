"""Transactional enqueue: a job exists if and only if the transaction that wrote it commits.

Real PostgreSQL and real Valkey (single server and cluster): the rows are written with
psycopg 3 (blocking and asyncio) in the test's own transactions, and a relay in this process
moves them (the kill -9 scenarios run the relay as a process: test_outbox_faults.py).
"""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from echomq import (
    AsyncQueue,
    ConfigurationError,
    InvalidArgument,
    InvalidPayload,
    InvalidQueueName,
    Verdict,
    generate,
)
from echomq.core.errors import InvalidJobId
from echomq.core.ids import timestamp_ms
from echomq.outbox import Outbox, OutboxJob, OutboxRelay, job_id_of
from tests.echomq._async.support import wait_for


async def _count(url: str) -> int:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        row = await (await conn.execute("SELECT count(*) FROM echomq_outbox WHERE error IS NULL")).fetchone()
        assert row is not None
        return int(row[0])


async def _jobs(queue: AsyncQueue) -> list[bytes]:
    """The payloads of every pending or delayed job of ``queue``."""
    out = []
    for state in ("pending", "delayed"):
        out += [v.row["payload"] for v in await queue.browse(state, limit=10_000)]
    return out


async def test_a_rolled_back_transaction_never_yields_a_job(pg_db: str, conn, qname: str) -> None:
    outbox = Outbox()
    with psycopg.connect(pg_db) as db:
        try:
            with db.transaction():
                outbox.add(db, qname, b"never")
                raise RuntimeError("the application's transaction fails")
        except RuntimeError:
            pass
        assert db.execute("SELECT count(*) FROM echomq_outbox WHERE queue = %s", (qname,)).fetchone() == (0,)
    async with OutboxRelay(pg_db, conn) as relay:
        report = await relay.drain()
    assert report.admitted == 0
    assert await _jobs(AsyncQueue(conn, qname)) == []


async def test_a_committed_transaction_yields_exactly_one_job(pg_db: str, conn, qname: str) -> None:
    outbox = Outbox()
    with psycopg.connect(pg_db) as db, db.transaction():
        row_id = outbox.add(db, qname, b"once")
    async with OutboxRelay(pg_db, conn) as relay:
        first = await relay.drain()
        second = await relay.drain()
    queue = AsyncQueue(conn, qname)
    assert (first.admitted, second.claimed) == (1, 0)
    assert await _jobs(queue) == [b"once"]
    (view,) = await queue.browse("pending")
    assert view.id.startswith("JOB") and await _count(pg_db) == 0
    assert view.id == job_id_of("echomq.outbox:echomq_outbox", row_id, timestamp_ms(view.id))


async def test_asyncio_connections_and_options_reach_the_queue(pg_db: str, conn, qname: str) -> None:
    outbox = Outbox()
    async with await psycopg.AsyncConnection.connect(pg_db) as db, db.transaction():
        await outbox.add_async(db, qname, b"plain")
        await outbox.add_async(db, qname, b"laned", lane="user-1", priority=2)
        await outbox.add_async(db, qname, b"later", delay_ms=60_000, max_attempts=3)
        await outbox.add_many_async(db, [OutboxJob(queue=qname, payload=b"m%d" % i) for i in range(3)])
    async with OutboxRelay(pg_db, conn) as relay:
        report = await relay.drain()
    queue = AsyncQueue(conn, qname)
    assert report.admitted == 6
    rows = {v.row["payload"]: v.row for s in ("pending", "delayed") for v in await queue.browse(s)}
    assert set(rows) == {b"plain", b"laned", b"later", b"m0", b"m1", b"m2"}
    assert rows[b"laned"]["lane"] == b"user-1" and rows[b"laned"]["prio"] == b"2"
    assert rows[b"later"]["state"] == b"delayed" and rows[b"later"]["max"] == b"3"


async def test_a_row_a_dead_relay_admitted_is_not_admitted_again(pg_db: str, conn, qname: str) -> None:
    """The relay died after admitting and before deleting: the row comes back, the same
    derived id is refused as a duplicate, the row is deleted, one job."""
    with psycopg.connect(pg_db) as db, db.transaction():
        Outbox().add(db, qname, b"x")
        cur = db.execute("SELECT id, (extract(epoch FROM created) * 1000)::bigint FROM echomq_outbox "
                         "WHERE queue = %s", (qname,))
        row_id, created = cur.fetchone()  # type: ignore[misc]
    queue = AsyncQueue(conn, qname)
    assert await queue.enqueue(job_id_of("echomq.outbox:echomq_outbox", row_id, created), b"x") \
        is Verdict.ENQUEUED
    async with OutboxRelay(pg_db, conn) as relay:
        report = await relay.drain()
    assert (report.admitted, report.duplicates) == (0, 1)
    assert await _jobs(queue) == [b"x"] and await _count(pg_db) == 0


async def test_a_row_with_its_own_job_id_is_admitted_under_it_once(pg_db: str, conn, qname: str) -> None:
    """An application's own id (the key of the row it wrote in the same transaction) is the
    job's id: a relay that admitted it and died finds it a duplicate; a bad id is refused
    before the insert."""
    own = generate("JOB")
    with psycopg.connect(pg_db) as db:
        with pytest.raises(InvalidJobId):
            Outbox().add(db, qname, b"x", job_id="not-an-id")
        with pytest.raises(InvalidJobId):
            Outbox().add(db, qname, b"x", job_id=generate("RND"))
        db.rollback()
        with db.transaction():
            Outbox().add(db, job=OutboxJob(queue=qname, payload=b"mine", lane="p1", serial=True, job_id=own))
            Outbox().add_many(db, [OutboxJob(queue=qname, payload=b"derived")])
    queue = AsyncQueue(conn, qname)
    async with OutboxRelay(pg_db, conn) as relay:
        first = await relay.drain()
    with psycopg.connect(pg_db) as db, db.transaction():  # the row back, as after a relay's death
        Outbox().add(db, job=OutboxJob(queue=qname, payload=b"mine", lane="p1", serial=True, job_id=own))
    async with OutboxRelay(pg_db, conn) as relay:
        second = await relay.drain()
    assert (first.admitted, second.admitted, second.duplicates) == (2, 0, 1)
    job = await queue.job(own)
    assert job is not None and job["payload"] == b"mine"
    assert sorted(await _jobs(queue)) == [b"derived", b"mine"]


async def test_several_relays_share_the_rows_and_admit_each_once(pg_db: str, conn, qname: str) -> None:
    with psycopg.connect(pg_db) as db, db.transaction():
        Outbox().add_many(db, [OutboxJob(queue=qname, payload=b"%d" % i) for i in range(600)])
    relays = [OutboxRelay(pg_db, conn, batch=50) for _ in range(3)]
    try:
        reports = await asyncio.gather(*(r.drain() for r in relays))
    finally:
        for r in relays:
            await r.aclose()
    assert sum(r.admitted for r in reports) == 600
    assert sum(r.duplicates for r in reports) == 0
    assert sorted(await _jobs(AsyncQueue(conn, qname))) == sorted(b"%d" % i for i in range(600))


async def test_a_commit_wakes_a_running_relay(pg_db: str, conn, qname: str) -> None:
    """poll_s is 60 s: only the NOTIFY of the commit can bring the job within the wait."""
    stop = asyncio.Event()
    relay = OutboxRelay(pg_db, conn, poll_s=60)
    task = asyncio.create_task(relay.run(stop))
    queue = AsyncQueue(conn, qname)
    try:
        await wait_for(lambda: _listening(pg_db), within=10)
        async with await psycopg.AsyncConnection.connect(pg_db) as db, db.transaction():
            await Outbox().add_async(db, qname, b"woken")

        async def arrived() -> bool:
            return await _jobs(queue) == [b"woken"]

        await wait_for(arrived, within=20)
    finally:
        stop.set()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await relay.aclose()


async def _listening(url: str) -> bool:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as db:
        cur = await db.execute("SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN%%'")
        row = await cur.fetchone()
        return bool(row and row[0])


async def test_rows_no_notification_announced_are_found_by_the_poll(pg_db: str, conn, qname: str) -> None:
    stop = asyncio.Event()
    relay = OutboxRelay(pg_db, conn, poll_s=0.2)
    task = asyncio.create_task(relay.run(stop))
    queue = AsyncQueue(conn, qname)
    try:
        with psycopg.connect(pg_db) as db, db.transaction():
            db.execute("SET LOCAL session_replication_role = replica")  # triggers off: no NOTIFY
            Outbox().add(db, qname, b"polled")

        async def arrived() -> bool:
            return await _jobs(queue) == [b"polled"]

        await wait_for(arrived, within=20)
    finally:
        stop.set()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await relay.aclose()


async def test_bad_input_is_refused_before_the_insert(pg_db: str, qname: str) -> None:
    outbox = Outbox()
    with psycopg.connect(pg_db) as db:
        with pytest.raises(InvalidQueueName):
            outbox.add(db, "a{b}", b"x")
        with pytest.raises(InvalidPayload):
            outbox.add(db, qname, "text")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="lane"):
            outbox.add(db, qname, b"x", lane="")
        db.execute("SELECT 1")  # the transaction is still usable: nothing was sent
        with pytest.raises(ConfigurationError, match="no outbox table"):
            Outbox("missing_table").add(db, qname, b"x")
        db.rollback()


async def test_a_row_the_queue_refuses_for_good_is_kept_with_its_error(pg_db: str, conn, qname: str) -> None:
    with psycopg.connect(pg_db) as db, db.transaction():
        db.execute("INSERT INTO echomq_outbox (queue, payload, options) VALUES (%s, 'x', '{\"speed\": 9}')",
                   (qname,))
        Outbox().add(db, qname, b"fine")
    async with OutboxRelay(pg_db, conn) as relay:
        report = await relay.drain()
        again = await relay.drain()
    assert (report.admitted, report.refused, again.claimed) == (1, 1, 0)
    with psycopg.connect(pg_db) as db:
        (error,) = db.execute("SELECT error FROM echomq_outbox WHERE queue = %s", (qname,)).fetchone()  # type: ignore[misc]
        db.execute("DELETE FROM echomq_outbox WHERE queue = %s", (qname,))
        db.commit()
    assert "speed" in error


def test_echomq_relay_refuses_bad_input_in_one_line() -> None:
    from tests.echomq.outbox.scenario import relay_process

    missing_table = relay_process("postgresql://nobody@127.0.0.1:1/x", "redis://127.0.0.1:1", "--drain",
                                  "--table", "Bad-Name")
    unreachable = relay_process("postgresql://nobody@127.0.0.1:1/x", "redis://127.0.0.1:1", "--drain")
    for done, words in ((missing_table, "lower-case identifier"), (unreachable, "refused the connection")):
        assert done.returncode == 1 and done.stderr.count("\n") == 1 and words in done.stderr, done.stderr


async def test_a_relay_with_a_minimum_age_leaves_young_rows_to_their_writer(
        pg_db: str, conn, qname: str) -> None:
    """``min_age_ms``: a writer that admits its own rows after the commit (and deletes them
    later) leaves the relay only the rows a writer that died left behind: the old ones."""
    outbox = Outbox()
    with psycopg.connect(pg_db) as db, db.transaction():
        outbox.add(db, qname, b"young")
    async with OutboxRelay(pg_db, conn, min_age_ms=3_600_000) as relay:
        assert (await relay.drain()).claimed == 0  # an hour old at the least: not yet
    async with OutboxRelay(pg_db, conn, min_age_ms=1) as relay:
        await asyncio.sleep(0.01)
        report = await relay.drain()
    assert report.admitted == 1 and await _jobs(AsyncQueue(conn, qname)) == [b"young"]
    with pytest.raises(InvalidArgument):
        OutboxRelay(pg_db, conn, min_age_ms=-1)
