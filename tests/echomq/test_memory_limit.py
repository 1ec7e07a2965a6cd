"""At ``maxmemory`` (noeviction): admission is refused whole, every draining transition runs.

A real ``valkey-server`` with a small ``maxmemory`` is filled with jobs until it refuses
admission; then each transition that moves or removes jobs must still run, and each
script that adds jobs must still be refused (docs/decisions/0010-memory-limit.md).
"""

from __future__ import annotations

import asyncio
import io
import logging
import urllib.request
from collections.abc import AsyncIterator, Iterator

import pytest
import redis
from rich.console import Console

from echomq import (
    AsyncConnector,
    AsyncQueue,
    ClusterConnector,
    Connector,
    EchoMQError,
    Lease,
    MemoryStatus,
    QueueOptions,
    Verdict,
    generate,
    memory_status,
    memory_status_async,
)
from echomq.client.info import server_info
from echomq.core.errors import BackPressure, ScriptContractError, ServerFull
from echomq.core.memory import BUFFER_SLACK
from echomq.core.model import Completion, RetryOutcome
from echomq.ops.info_view import render_info
from echomq.protocol.scripts import bundle, parse
from echomq.runtime.consumer import Consumer, ConsumerOptions
from echomq.servers.server import EmbeddedValkey
from tests.echomq._async.support import wait_for
from tests.echomq.invariants import assert_consistent

# add jobs: deny-oom, back-pressure (flow_hold/flow_admit: a flow's held children, waiting parent)
ADMISSION = {"admit", "enqueue", "enqueue_batch", "schedule", "flow_hold", "flow_admit",
             "throttle", "debounce"}  # admission with a dedupe window (issue 28 item 2)
DRAINS = {"claim", "heartbeat", "heartbeat_batch", "complete", "complete_batch", "retry", "reap",
          "promote",
          "expire",  # ends waiting jobs past their deadline (decision 0045): frees nothing, adds none
          "purge", "requeue", "cancel", "fence",  # move or remove jobs (or record the version once)
          "worker_beat",  # one bounded entry per live worker: a worker stays visible at the limit
          "pause", "limits",  # the claim gate's controls: an operator can pause or limit at the limit
          "unload_row",  # removes a moved row from a retired shard (decision 0032)
          # start/drop/ack a child, settle/cancel a parent (decision 0038)
          "flow_start", "flow_child", "flow_parent"}
READS = {"browse", "info", "peek", "pending_size", "row", "search", "search_rows", "stats",
         "rows_exist"}  # an online reshard's admission check (decision 0032)
MOVES = {"import_row"}  # copies a row between shards in a reshard: deny-oom, like admission
ANNOTATIONS = {"trace_attach",  # adds a field to an existing row: deny-oom, adds no job
               "park",  # one bounded registration per idle consumer (decision 0018): deny-oom
               "progress",  # one bounded field on an existing active row (decision 0023): deny-oom
               "reserve"}  # a sharded id's reservation row, no job (decision 0040): deny-oom
PAYLOAD = b"x" * 1024


def _adds_rows(source: str) -> bool:
    """A script that writes a job's payload creates rows: it adds work."""
    return "'payload', ARGV" in source


def test_scripts_that_add_jobs_are_refused_at_the_limit() -> None:
    scripts = bundle()
    assert set(scripts) == ADMISSION | DRAINS | READS | ANNOTATIONS | MOVES, (
        "a new script: decide its memory flag")
    assert all(not s.allow_oom and not s.read_only for n, s in scripts.items()
               if n in ANNOTATIONS | MOVES)
    for name, script in scripts.items():
        if _adds_rows(script.source) or name in ADMISSION:
            assert not script.allow_oom, f"{name} adds jobs: it must stay deny-oom"
            assert not script.read_only
    assert {n for n, s in scripts.items() if _adds_rows(s.source)} == ADMISSION
    assert {n for n, s in scripts.items() if s.allow_oom} == DRAINS
    assert {n for n, s in scripts.items() if s.read_only} == READS
    assert all(s.flags == frozenset() for n, s in scripts.items() if n in ADMISSION)


@pytest.mark.parametrize("shebang", ["#!lua flags=allow-om", "#!lua flags=", "#!lua  flags=no-writes",
                                     "#!lua flags=no-writes,no-writes", "#!lua allow-oom",
                                     "#!lua flags=no-writes,allow-oom"])
def test_a_malformed_flag_line_is_refused(shebang: str) -> None:
    text = f"{shebang}\n-- name: s\n-- summary: x\n-- RETURNS: x\n-- ERRORS: none\nreturn 1\n"
    with pytest.raises(ScriptContractError):
        parse("s", text)


def test_flags_are_parsed() -> None:
    head = "-- name: s\n-- summary: x\n-- RETURNS: x\n-- ERRORS: none\nreturn 1\n"
    assert parse("s", "#!lua\n" + head).flags == frozenset()
    s = parse("s", "#!lua flags=allow-oom,allow-stale\n" + head)
    assert s.allow_oom and not s.read_only and s.flags == {"allow-oom", "allow-stale"}


# ---------------------------------------------------------------- real server at its limit
@pytest.fixture
def small_server() -> Iterator[EmbeddedValkey]:
    """A private server with a 4 MB limit under noeviction (the policy a queue runs under)."""
    with EmbeddedValkey(extra={"maxmemory": "4mb", "maxmemory-policy": "noeviction"}) as server:
        yield server


@pytest.fixture
async def small(small_server: EmbeddedValkey) -> AsyncIterator[AsyncConnector]:
    conn = AsyncConnector.from_url(small_server.url)
    yield conn
    await conn.aclose()


def _is_oom(exc: BaseException) -> bool:
    """The typed back-pressure error, whose message names the limit and the policy."""
    return (isinstance(exc, ServerFull) and isinstance(exc, BackPressure)
            and "maxmemory 4.0 MiB" in str(exc) and "policy noeviction" in str(exc)
            and "nothing was written" in str(exc))


async def fill(queue: AsyncQueue, step: int = 500) -> list[str]:
    """Admit 1 KiB jobs until the server refuses; returns the admitted ids (bounded).

    The batch that meets the limit answers per item, in input order: ENQUEUED for each
    admitted job, its typed ServerFull for each refused one (whose row does not exist).
    A batch call's request counts towards the server's memory while it is read, so the
    list can be refused a little below the limit: single admissions then fill the rest,
    until one is refused too.
    """
    admitted: list[str] = []
    for _ in range(100):
        batch = [generate("JOB") for _ in range(step)]
        verdicts = await queue.enqueue_many([(i, PAYLOAD) for i in batch])
        admitted += [i for i, v in zip(batch, verdicts, strict=True) if v is Verdict.ENQUEUED]
        refused = [v for v in verdicts if isinstance(v, EchoMQError)]
        if refused:
            assert all(_is_oom(v) for v in refused), refused[:3]
            assert all(v is Verdict.ENQUEUED or _is_oom(v) for v in verdicts)
            stored = [await queue.job(i) is not None for i in batch]
            assert stored == [v is Verdict.ENQUEUED for v in verdicts]  # verdicts in order
            refusal: EchoMQError | None = None
            for _ in range(10_000):
                one = generate("JOB")
                try:
                    verdict = await queue.enqueue(one, PAYLOAD)
                except EchoMQError as exc:
                    refusal = exc
                    break
                assert verdict is Verdict.ENQUEUED
                admitted.append(one)
            assert refusal is not None and _is_oom(refusal), "single admissions were never refused"
            assert await queue.job(one) is None
            return admitted
    raise AssertionError("the server never refused admission")


async def test_every_drain_runs_at_the_limit_and_admission_is_refused(
        small: AsyncConnector, small_server: EmbeddedValkey) -> None:
    raw = redis.Redis.from_url(small_server.url)
    q = AsyncQueue(small, "full", options=QueueOptions(max_attempts=2))
    ids = await fill(q)
    assert len(ids) > 1000
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        raw.set("probe", b"x")  # the server itself is at its limit
    for admission in (q.enqueue(generate("JOB"), b""), q.admit(generate("JOB"), b"", lane="a")):
        with pytest.raises(EchoMQError) as refused:
            await admission
        assert _is_oom(refused.value)
    # Every draining transition runs: claim, heartbeat and complete (one and a batch), retry,
    # defer, promote, reap, requeue, purge and retention; the version fence answers.
    leases = await q.claim(6, lease_ms=60_000)
    assert len(leases) == 6
    assert await q.heartbeat(leases[0], lease_ms=60_000) is not None
    assert None not in await q.heartbeat_many(leases[:3], lease_ms=60_000)  # heartbeat_batch
    assert await q.complete(leases[0], b"r") is Completion.COMPLETED
    assert await q.complete_many(leases[1:3]) == [Completion.COMPLETED] * 2
    row = raw.hgetall(q.job_key(leases[0].id))
    assert row[b"state"] == b"done" and b"payload" not in row and row[b"result"] == b"r"
    assert await q.retry(leases[3], delay_ms=0, error="boom") is RetryOutcome.SCHEDULED
    assert await q.defer(leases[4], delay_ms=1) is RetryOutcome.SCHEDULED
    assert await _eventually(q.promote, lambda n: n == 1)
    one = AsyncQueue(small, "full", options=QueueOptions(max_attempts=1, keep_done_ms=1))
    assert await one.retry(leases[5], delay_ms=0, error="x") is RetryOutcome.DEAD
    assert raw.hget(q.job_key(leases[5].id), "payload") == PAYLOAD  # dead rows keep it
    assert await q.requeue_dead(limit=10) == 1
    assert await q.claim(1, lease_ms=1)
    assert await _eventually(q.reap, lambda r: sum(r) == 1)  # requeued, or dead at its limit
    (last,) = await q.claim(1, lease_ms=60_000)
    assert await one.retry(last, delay_ms=0, error="y") is RetryOutcome.DEAD
    dead = (await q.stats()).dead
    assert dead >= 1
    assert await q.purge_dead(limit=10) == dead
    assert await _eventually(one.trim, lambda n: n == 3)
    await q.fence()
    assert_consistent(raw, "full")
    raw.close()


async def _eventually(call, ok, tries: int = 500):  # type: ignore[no-untyped-def]
    """Poll ``call`` until ``ok`` holds on its answer (bounded)."""
    for _ in range(tries):
        got = await call()
        if ok(got):
            return True
        await asyncio.sleep(0.01)
    return False


async def test_memory_status_names_the_limit_and_policy(
        small: AsyncConnector, small_server: EmbeddedValkey) -> None:
    q = AsyncQueue(small, "status")
    before = await memory_status_async(small, "status")
    assert before.maxmemory == 4 * 1024 * 1024 and before.policy == "noeviction"
    assert not before.refusing and 0 < before.counted <= before.used
    await fill(q)
    full = await memory_status_async(small, "status")
    # at its line: within a refused request's buffers of the limit (BUFFER_SLACK, freed after)
    assert full.refusing and full.counted >= full.maxmemory - BUFFER_SLACK
    line = full.describe()
    assert "maxmemory 4.0 MiB" in line and "noeviction" in line and "refusing admissions" in line
    sync = Connector.from_url(small_server.url)
    assert memory_status(sync).refusing  # the blocking twin
    sync.close()


def test_memory_status_on_either_backend(sync_conn: Connector | ClusterConnector, qname: str) -> None:
    status = memory_status(sync_conn, qname)
    assert status.used > 0 and status.policy and not status.refusing
    assert memory_status(sync_conn).used > 0  # without a queue: the fullest node
    if isinstance(sync_conn, ClusterConnector):
        assert status.node  # which primary it read
    line = MemoryStatus(used=10, maxmemory=0, policy="noeviction", counted=10).describe()
    assert "no maxmemory" in line
    evicting = MemoryStatus(used=10, maxmemory=100, policy="allkeys-lru", counted=10)
    assert evicting.evicting and "run maxmemory-policy noeviction" in evicting.describe()


async def test_a_consumer_drains_a_full_queue_and_admissions_resume_by_themselves(
        small: AsyncConnector, small_server: EmbeddedValkey,
        caplog: pytest.LogCaptureFixture) -> None:
    raw = redis.Redis.from_url(small_server.url)
    q = AsyncQueue(small, "drain")
    ids = await fill(q)
    assert (await memory_status_async(small, "drain")).refusing
    # The server's own accounting hovers at the line (a refused batch item, then buffers
    # freed): keep admitting one job at a time until one is refused, as a producer would
    # meet it. That refused job is the one the producer must get in by itself.
    for _ in range(1000):
        late = generate("JOB")
        try:
            assert await q.enqueue(late, PAYLOAD) is Verdict.ENQUEUED
        except ServerFull:
            break  # the producer's try met the limit
        ids.append(late)
    else:
        raise AssertionError("a full server kept admitting single jobs")

    async def producer() -> Verdict:
        """Retry the refused job on back-pressure, as a producer should: no person acts."""
        while True:
            try:
                return await q.enqueue(late, PAYLOAD)
            except ServerFull:
                await asyncio.sleep(0.05)

    seen: list[str] = []
    met = asyncio.Event()  # the consumer has met the full server

    async def handler(lease: Lease) -> None:
        await met.wait()
        seen.append(lease.id)

    consumer = Consumer(q, handler, options=ConsumerOptions(
        beat_ms=20, lease_ms=5000, concurrency=32, grace_s=2.0))
    with caplog.at_level(logging.WARNING):
        task = asyncio.create_task(consumer.run())
        try:
            # Its handlers hold their first jobs until the consumer has met the limit (its
            # upkeep beat refused, the episode counted): else a fast first flush could free
            # memory before the first beat, and no episode would be met at all.
            await wait_for(lambda: _met(consumer), within=30)
            met.set()
            assert await asyncio.wait_for(producer(), 120) is Verdict.ENQUEUED
            await wait_for(lambda: _done(q, len(ids) + 1), within=120)
            await wait_for(lambda: _logged(caplog, "below its memory limit again"), within=30)
            assert not task.done()
        finally:
            consumer.stop()
            await asyncio.wait_for(task, 20)
    assert sorted(seen) == sorted([*ids, late])  # every job ran once
    assert raw.config_get("maxmemory")["maxmemory"] == str(4 * 1024 * 1024)  # never raised
    status = await memory_status_async(small, "drain")
    assert not status.refusing, status.describe()
    assert set(assert_consistent(raw, "drain").values()) == {"done"}
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    lines = [r.getMessage() for r in caplog.records]
    assert consumer.stats.memory_full >= 1  # what the worker's operator sees
    assert any("at its memory limit" in m and "maxmemory 4.0 MiB" in m for m in lines), lines
    assert any("below its memory limit again" in m for m in lines), lines
    raw.close()


async def _met(consumer: Consumer) -> bool:
    return consumer.stats.memory_full >= 1


async def _logged(caplog: pytest.LogCaptureFixture, text: str) -> bool:
    return any(text in r.getMessage() for r in caplog.records)


async def _done(q: AsyncQueue, n: int) -> bool:
    return (await q.stats()).done == n


async def test_info_says_when_the_server_refuses_admissions(small: AsyncConnector) -> None:
    q = AsyncQueue(small, "info")
    await q.enqueue(generate("JOB"), b"")
    calm = await server_info(small)
    assert calm.policy == "noeviction" and calm.maxmemory == 4 * 1024 * 1024 and not calm.refusing
    await fill(q)
    full = await server_info(small)
    assert full.refusing and full.as_dict()["refusing"] is True
    out = io.StringIO()
    render_info(full, Console(file=out, width=120))
    text = out.getvalue()
    assert "of 4.0 MiB (noeviction)" in text and "admissions are refused" in text


async def test_the_dashboard_shows_memory_and_says_when_admissions_are_refused(
        small: AsyncConnector, small_server: EmbeddedValkey) -> None:
    from echomq.ops.dashboard import DashboardOptions, create_app
    from tests.dashboard_support import served

    q = AsyncQueue(small, "board")
    await q.enqueue(generate("JOB"), b"")
    app = create_app(small_server.url, options=DashboardOptions(sample_s=5, refresh_s=0))
    with served(app) as url:
        calm = await asyncio.to_thread(_get, url + "/")
        assert "of 4.0 MiB (noeviction)" in calm and "refusing admissions" not in calm
        await fill(q)
        # The server's accounting hovers at the line after a refused batch (buffers freed):
        # whenever a single admission is refused, the page must say so.
        for _ in range(200):
            try:
                await q.enqueue(generate("JOB"), PAYLOAD)
                continue
            except ServerFull:
                full = await asyncio.to_thread(_get, url + "/")
            if "refusing admissions" in full:
                break
        else:
            raise AssertionError("the dashboard never said admissions are refused")
    assert "refusing admissions" in full and 'class="flash err memory"' in full


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=20) as reply:
        return str(reply.read().decode())
