"""A consumer never dies of a server's refusal (issue 20): the classification table, and
real servers that refuse (BUSY, LOADING, NOPERM, WRONGPASS, NOAUTH) while a consumer runs."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import threading
from collections.abc import Iterator

import pytest
import redis
from redis import exceptions as rex
from redis._parsers.base import BaseParser

from echomq import AsyncConnector, AsyncQueue, Lease, generate
from echomq.client._edge import translate
from echomq.client.replies import Episodes, Kind, classify
from echomq.core.errors import (
    ConfigurationError,
    ProtocolVersionError,
    ServerBusy,
    ServerError,
    ServerUnavailable,
)
from echomq.core.outcomes import BackoffPolicy
from echomq.runtime.consumer import Consumer, ConsumerOptions
from echomq.servers.server import EmbeddedValkey
from tests.echomq._async.support import wait_for
from tests.echomq.invariants import assert_consistent

FAST = ConsumerOptions(beat_ms=20, lease_ms=3000, concurrency=8, grace_s=2.0,
                       backoff=BackoffPolicy(base_ms=10, max_ms=50))


def reply(text: str) -> BaseException:
    """The exception redis-py raises for this error reply (its own parser)."""
    return BaseParser.parse_error(text)


def wrapped(inner: BaseException, outer: BaseException) -> BaseException:
    outer.__cause__ = inner
    return outer


# Every reply a worker can meet, as the server words it, and what the worker must do.
TABLE: list[tuple[str, BaseException, Kind, str]] = [
    ("oom", reply("OOM command not allowed when used memory > 'maxmemory'."),
     Kind.BACK_PRESSURE, "OOM"),
    ("busy", reply("BUSY Valkey is busy running a script. You can only call SCRIPT KILL or "
                   "SHUTDOWN NOSAVE."), Kind.BACK_PRESSURE, "BUSY"),
    ("loading", reply("LOADING Valkey is loading the dataset in memory"), Kind.TRANSIENT, "LOADING"),
    ("misconf", reply("MISCONF Errors writing to the AOF file: No space left on device"),
     Kind.TRANSIENT, "MISCONF"),
    ("readonly", reply("READONLY You can't write against a read only replica."),
     Kind.TRANSIENT, "READONLY"),
    ("tryagain", reply("TRYAGAIN Multiple keys request during rehashing of slot"),
     Kind.TRANSIENT, "TRYAGAIN"),
    ("clusterdown", reply("CLUSTERDOWN The cluster is down"), Kind.TRANSIENT, "CLUSTERDOWN"),
    ("masterdown", reply("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is "
                         "set to 'no'."), Kind.TRANSIENT, "MASTERDOWN"),
    ("moved", reply("MOVED 3999 127.0.0.1:6381"), Kind.TRANSIENT, "MOVED"),
    ("timeout", rex.TimeoutError("Timeout reading from socket"), Kind.TRANSIENT, "TIMEOUT"),
    ("asyncio timeout", TimeoutError(), Kind.TRANSIENT, "TIMEOUT"),
    ("lost connection", rex.ConnectionError("Connection closed by server."),
     Kind.TRANSIENT, "CONNECTION"),
    ("refused", ConnectionRefusedError(111, "Connection refused"), Kind.TRANSIENT, "CONNECTION"),
    ("reset", ConnectionResetError(104, "reset by peer"), Kind.TRANSIENT, "CONNECTION"),
    ("budget spent", ServerUnavailable("server unavailable for 10.0s"), Kind.TRANSIENT,
     "UNAVAILABLE"),
    ("budget spent loading", wrapped(reply("LOADING Valkey is loading the dataset in memory"),
                                     ServerUnavailable("server unavailable for 10.0s")),
     Kind.TRANSIENT, "LOADING"),
    ("noperm", reply("NOPERM User u has no permissions to run the 'evalsha' command"),
     Kind.CONFIGURATION, "NOPERM"),
    ("wrongpass", reply("WRONGPASS invalid username-password pair or user is disabled."),
     Kind.CONFIGURATION, "WRONGPASS"),
    ("noauth", reply("NOAUTH Authentication required."), Kind.CONFIGURATION, "NOAUTH"),
    ("wrongpass behind the budget", wrapped(
        reply("WRONGPASS invalid username-password pair or user is disabled."),
        ServerUnavailable("server unavailable")), Kind.CONFIGURATION, "WRONGPASS"),
    ("version fence", ProtocolVersionError("EMQVERSION queue speaks echomq:9.0.0"),
     Kind.CONFIGURATION, "EMQVERSION"),
    ("version fence reply", reply("EMQVERSION queue speaks echomq:9.0.0, client speaks x"),
     Kind.CONFIGURATION, "EMQVERSION"),
    ("wrapped busy", ServerError("unexpected reply: BUSY Valkey is busy"), Kind.FAULT,
     "ServerError"),
    ("unknown command", reply("ERR unknown command 'SPUBLISH'"), Kind.FAULT, "ResponseError"),
    ("script error", reply("EMQARG keep_ms must be a non-negative number"), Kind.FAULT,
     "ResponseError"),
]


@pytest.mark.parametrize(("exc", "kind", "code"), [row[1:] for row in TABLE],
                         ids=[row[0] for row in TABLE])
def test_every_reply_is_classified(exc: BaseException, kind: Kind, code: str) -> None:
    refusal = classify(exc)
    assert (refusal.kind, refusal.code) == (kind, code)
    assert refusal.kind.retry is (kind in (Kind.BACK_PRESSURE, Kind.TRANSIENT))
    if kind is Kind.CONFIGURATION:
        assert "fix" in refusal.detail or ":" in refusal.detail  # the line names what to do


def test_episodes_log_once_and_count(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("echomq.test.episodes")
    ep = Episodes("c", log, first_s=0.01, cap_s=0.04)
    busy, oom = classify(TABLE[1][1]), classify(TABLE[0][1])
    with caplog.at_level(logging.WARNING, logger=log.name):
        delays = [ep.refused(busy, "a flush") for _ in range(5)]
        ep.answered()
        ep.answered()
        ep.refused(oom, "a flush")
        ep.refused(busy, "a heartbeat")  # another reason: another episode
    assert delays == [0.01, 0.02, 0.04, 0.04, 0.04]
    assert ep.episodes == 3 and ep.by_code == {"BUSY": 2, "OOM": 1} and ep.refusals == 7
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 4 and "BUSY" in lines[0] and "answers again" in lines[1]


# ---------------------------------------------------------------- consumers on real servers
@contextlib.asynccontextmanager
async def running(consumer: Consumer):  # type: ignore[no-untyped-def]
    task = asyncio.create_task(consumer.run())
    try:
        yield task
    finally:
        consumer.stop()
        await asyncio.wait_for(task, 20)


@pytest.fixture
def busy_server() -> Iterator[EmbeddedValkey]:
    with EmbeddedValkey(extra={"busy-reply-threshold": "100"}) as server:
        yield server


def _never_retrieved(caplog: pytest.LogCaptureFixture) -> list[str]:
    gc.collect()
    return [r.getMessage() for r in caplog.records if "never retrieved" in r.getMessage()]


async def test_a_busy_episode_is_outlived_with_every_job_run(
        busy_server: EmbeddedValkey, caplog: pytest.LogCaptureFixture) -> None:
    raw = redis.Redis.from_url(busy_server.url)
    conn = AsyncConnector.from_url(busy_server.url)
    q = AsyncQueue(conn, "busy")
    ids = [generate("JOB") for _ in range(2000)]
    await q.enqueue_many([(i, b"p") for i in ids])
    seen: set[str] = set()
    first = asyncio.Event()

    async def handler(lease: Lease) -> None:
        seen.add(lease.id)
        first.set()
        await asyncio.sleep(0.002)

    def long_script() -> None:
        other = redis.Redis.from_url(busy_server.url)
        with contextlib.suppress(rex.ResponseError):  # "Script killed by user"
            other.eval("while true do end", 0)
        other.close()

    consumer = Consumer(q, handler, options=FAST)
    with caplog.at_level(logging.WARNING):
        async with running(consumer) as task:
            await asyncio.wait_for(first.wait(), 10)
            script = threading.Thread(target=long_script)
            script.start()
            await wait_for(lambda: _async(consumer.stats.refusals.get("BUSY")), within=15)
            with pytest.raises(ServerBusy, match="nothing was written"):  # the producer's side
                await q.enqueue(generate("JOB"), b"late")
            verdicts = await q.enqueue_many([(generate("JOB"), b"late") for _ in range(3)])
            assert all(isinstance(v, ServerBusy) for v in verdicts)
            killer = redis.Redis.from_url(busy_server.url)
            await wait_for(lambda: _async(_kill(killer)), within=10)
            killer.close()
            await asyncio.to_thread(script.join, 10)
            await wait_for(lambda: _async(len(seen) == len(ids) or task.done()), within=60)
            assert not task.done(), task
            await wait_for(lambda: _done(q, len(ids)), within=30)
    assert seen == set(ids)
    assert consumer.stats.refusals["BUSY"] >= 1 and consumer.stats.episodes >= 1
    assert set(assert_consistent(raw, "busy").values()) == {"done"}
    lines = [r.getMessage() for r in caplog.records]
    started = [m for m in lines if "server refused" in m and "BUSY" in m]
    assert len(started) == consumer.stats.refusals["BUSY"]  # one line per episode, not per call
    assert any("answers again" in m for m in lines)
    assert not _never_retrieved(caplog)
    raw.close()
    await conn.aclose()


def _kill(client: redis.Redis) -> bool:
    try:
        client.script_kill()
    except rex.ResponseError as exc:  # NOTBUSY: the script is not running yet
        return "NOTBUSY" not in str(exc)
    return True


async def _async(value: object) -> object:
    return value


async def _done(q: AsyncQueue, n: int) -> bool:
    return (await q.stats()).done == n


async def test_a_loading_restart_is_outlived_with_every_job_run(
        tmp_path: object, caplog: pytest.LogCaptureFixture) -> None:
    # key-load-delay (µs per key) makes loading take seconds; a short events interval lets
    # the loading server answer LOADING instead of holding connections in its backlog.
    server = EmbeddedValkey(extra={"key-load-delay": "1000",
                                   "loading-process-events-interval-bytes": "1024"})
    server.start()
    try:
        raw = redis.Redis.from_url(server.url)
        with raw.pipeline(transaction=False) as pipe:
            for i in range(2500):
                pipe.set(f"filler:{i}", b"f" * 64)
            pipe.execute()
        # A short connector budget, so the consumer itself meets LOADING (the connector's
        # own retries would otherwise hide it) and rides it out as an episode.
        conn = AsyncConnector.from_url(server.url, retry_budget_s=0.5, socket_timeout=2.0)
        q = AsyncQueue(conn, "loading")
        ids = [generate("JOB") for _ in range(600)]
        await q.enqueue_many([(i, b"p") for i in ids])
        seen: set[str] = set()

        async def handler(lease: Lease) -> None:
            seen.add(lease.id)
            await asyncio.sleep(0.01)

        consumer = Consumer(q, handler, options=ConsumerOptions(
            beat_ms=20, lease_ms=30_000, concurrency=4, grace_s=2.0))
        with caplog.at_level(logging.WARNING):
            async with running(consumer) as task:
                await wait_for(lambda: _async(len(seen) >= 50), within=20)
                raw.bgrewriteaof()  # the AOF's base becomes an RDB: key-load-delay applies
                await wait_for(lambda: _async(_rewritten(raw)), within=20)
                raw.close()
                await asyncio.to_thread(server.restart)  # returns once loading is over
                await wait_for(lambda: _async(len(seen) == len(ids) or task.done()), within=60)
                assert not task.done(), task
                await wait_for(lambda: _done(q, len(ids)), within=60)
        assert seen == set(ids)
        assert consumer.stats.refusals.get("LOADING", 0) >= 1, consumer.stats
        raw = redis.Redis.from_url(server.url)
        assert set(assert_consistent(raw, "loading").values()) == {"done"}
        raw.close()
        assert not _never_retrieved(caplog)
        await conn.aclose()
    finally:
        server.cleanup()


def _rewritten(raw: redis.Redis) -> bool:
    info = raw.info("persistence")
    return not (info["aof_rewrite_in_progress"] or info["aof_rewrite_scheduled"])


@pytest.fixture
def acl_server() -> Iterator[EmbeddedValkey]:
    with EmbeddedValkey() as server:
        admin = redis.Redis.from_url(server.url)
        # A user that may read but not run scripts: every transition is refused (NOPERM).
        admin.acl_setuser("reader", enabled=True, passwords=["+pw"], keys=["~*"],
                          channels=["&*", "*"], commands=["+@read", "+@connection", "+ssubscribe",
                                                          "+info", "+set"])
        admin.close()
        yield server


@pytest.mark.parametrize(("url_auth", "code"), [("reader:pw@", "NOPERM"),
                                                 ("reader:wrong@", "WRONGPASS")])
async def test_a_configuration_error_stops_the_consumer_with_one_line(
        acl_server: EmbeddedValkey, url_auth: str, code: str,
        caplog: pytest.LogCaptureFixture) -> None:
    admin = AsyncConnector.from_url(acl_server.url)
    q = AsyncQueue(admin, "acl")
    await q.enqueue_many([(generate("JOB"), b"p") for _ in range(5)])
    conn = AsyncConnector.from_url(f"redis://{url_auth}127.0.0.1:{acl_server.port}",
                                   retry_budget_s=0.5)
    consumer = Consumer(AsyncQueue(conn, "acl"), lambda lease: None, options=FAST)
    with (caplog.at_level(logging.ERROR, logger="echomq.runtime.consumer"),
          pytest.raises(ConfigurationError) as stopped):
        await asyncio.wait_for(consumer.run(), 20)
    message = str(stopped.value)
    assert code in message and "\n" not in message
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [r.getMessage() for r in errors] == [message]
    assert (await q.stats()).pending == 5  # nothing moved
    await conn.aclose()
    await admin.aclose()


@pytest.mark.parametrize(("exc", "kind", "code"),
                         [row[1:] for row in TABLE if isinstance(row[1], rex.ResponseError)
                          and row[2] is not Kind.FAULT],
                         ids=[row[0] for row in TABLE if isinstance(row[1], rex.ResponseError)
                              and row[2] is not Kind.FAULT])
def test_a_reply_mapped_at_the_edge_keeps_its_kind(exc: BaseException, kind: Kind, code: str) -> None:
    # A pipeline's in-place error reply reaches the consumer translated, with no cause to read:
    # redis-py strips the code of the replies it maps (READONLY, TRYAGAIN, CLUSTERDOWN, ...),
    # so the edge must put it back or a failover reply would read as a fault.
    translated = translate(exc)
    assert translated.__cause__ is None
    assert (classify(translated).kind, classify(translated).code) == (kind, code)
