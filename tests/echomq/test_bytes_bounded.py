"""Every byte a client sends that a draining (allow-oom) script keeps is bounded.

Three layers (docs/protocol.md, "Bounds"): the client refuses an over-size result, error,
progress report, worker name or description before any I/O (``PayloadTooLarge`` /
``InvalidArgument``); the script refuses the same from any client before its first write
(``EMQARG``); and past ``maxmemory`` a call keeps at most ``OOM_ROOM`` (1 KiB) of client
bytes. The static test reads every allow-oom script and fails on a stored ARGV no check
bounds (:mod:`tests.echomq.lua_writes`), and fails on copies with a check removed.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator

import pytest
import redis

from echomq import AsyncConnector, AsyncQueue, Lease, QueueOptions, generate
from echomq.client.registry import Registration
from echomq.core import bounds as b
from echomq.core.errors import InvalidArgument, PayloadTooLarge, ServerFull
from echomq.core.failures import clip
from echomq.core.model import Completion, RetryOutcome
from echomq.protocol.keyspace import queue_key
from echomq.protocol.scripts import bundle, load
from echomq.servers.server import EmbeddedValkey
from tests.echomq.lua_writes import LUA, stored_argv, unbounded
from tests.echomq.test_memory_limit import fill

ALLOW_OOM = sorted(n for n, s in bundle().items() if s.allow_oom)


# ------------------------------------------------------------------ static
@pytest.mark.parametrize("name", ALLOW_OOM)
def test_every_argv_an_allow_oom_script_stores_is_bounded_before_its_first_write(name: str) -> None:
    assert unbounded(name, (LUA / f"{name}.lua").read_text(encoding="utf-8")) == []


def test_the_reader_sees_the_client_bytes_each_script_stores() -> None:
    """The reader is not blind: it finds the values the issue names (results, errors, names,
    descriptions, TTLs) where the scripts store them."""
    seen = {n: {s.name for s in stored_argv(n, (LUA / f"{n}.lua").read_text())[0]}
            for n in ALLOW_OOM}
    assert {"result"} <= seen["complete"]
    assert {"attempts"} <= seen["complete_batch"]
    assert {"error", "delay_ms"} <= seen["retry"]
    assert {"name", "about", "ttl_ms"} <= seen["worker_beat"]
    # Deny-oom scripts are refused whole at the limit; the reader still sees what they store.
    # (admit's row is written by include/options.lua: read the script with its includes)
    for name in ("admit", "throttle", "debounce"):
        assert "payload" in {s.name for s in stored_argv(name, bundle()[name].source)[0]}


MUTANTS = [
    ("complete", r"local big = too_long\('result', #ARGV\[4\], MAX_RESULT\) or ",
     "local big = "),
    ("complete_batch", r"big = big or too_long\('result', #ARGV\[3 \* i \+ 2\], MAX_RESULT\)",
     "big = big"),
    ("retry", r"local big = too_long\('error', #err, MAX_ERROR\)", "local big = nil"),
    ("worker_beat", r"too_long\('name', #ARGV\[1\], MAX_NAME\) or ", ""),
    ("worker_beat", r"or too_long\('about', #ARGV\[3\], MAX_ABOUT\)", ""),
    ("worker_beat", r"ttl > MAX_TTL_MS or ", ""),
]


@pytest.mark.parametrize(("name", "check", "instead"), MUTANTS)
def test_the_static_test_fails_on_a_script_with_a_check_removed(
        name: str, check: str, instead: str) -> None:
    text = (LUA / f"{name}.lua").read_text(encoding="utf-8")
    mutant, n = re.subn(check, instead, text)
    assert n == 1, f"the check {check!r} is not in {name}.lua"
    assert unbounded(name, mutant), f"{name} without {check!r} passed the static test"


def test_the_lua_bounds_are_the_python_bounds() -> None:
    text = (LUA / "include" / "bytes.lua").read_text(encoding="utf-8")
    for lua, py in (("MAX_RESULT", b.MAX_RESULT), ("MAX_RESULTS", b.MAX_RESULTS),
                    ("MAX_ERROR", b.MAX_ERROR), ("MAX_PROGRESS", b.MAX_PROGRESS),
                    ("MAX_NAME", b.MAX_WORKER_NAME), ("MAX_ABOUT", b.MAX_ABOUT),
                    ("MAX_TTL_MS", b.MAX_TTL_MS), ("ROOM", b.OOM_ROOM)):
        assert f"local {lua} = {py} " in text, lua


# ------------------------------------------------------------------ the client refuses first
async def _leased(q: AsyncQueue, n: int = 1) -> list[Lease]:
    for _ in range(n):
        await q.enqueue(generate("JOB"), b"p")
    return await q.claim(n, lease_ms=60_000)


async def test_the_client_refuses_an_over_size_value_before_any_io(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    q = AsyncQueue(queue.connector, queue.name, options=QueueOptions(max_result=100, max_error=50))
    (lease,) = await _leased(q)
    before = raw.hgetall(q.job_key(lease.id))
    with pytest.raises(PayloadTooLarge):
        await q.complete(lease, b"r" * 101)
    with pytest.raises(PayloadTooLarge):
        await q.complete_many([lease], [b"r" * 101])
    with pytest.raises(PayloadTooLarge):
        await q.retry(lease, delay_ms=0, error="é" * 26)  # 52 bytes of UTF-8
    with pytest.raises(PayloadTooLarge):
        await q.report_progress(lease, b"x" * (b.MAX_PROGRESS + 1))
    assert raw.hgetall(q.job_key(lease.id)) == before  # nothing was written
    with pytest.raises(InvalidArgument):
        QueueOptions(max_result=b.MAX_RESULT + 1)
    with pytest.raises(InvalidArgument):
        QueueOptions(max_error=b.MAX_ERROR + 1)
    with pytest.raises(InvalidArgument):
        Registration(queue.connector, [queue.name], name="w" * (b.MAX_WORKER_NAME + 1))
    with pytest.raises(InvalidArgument):
        Registration(queue.connector, [queue.name], beat_s=1, ttl_s=b.MAX_TTL_MS)
    too_big = Registration(queue.connector, [queue.name], about=lambda: {"x": "y" * b.MAX_ABOUT})
    with pytest.raises(PayloadTooLarge):
        await too_big.beat()
    assert await q.complete(lease, b"r" * 100) is Completion.COMPLETED


def test_clip_cuts_at_a_character_boundary() -> None:
    assert clip("abc", 10) == "abc"
    assert clip("é" * 10, 5) == "éé"
    assert len(clip("x" * 100_000, b.MAX_ERROR).encode()) == b.MAX_ERROR


# ------------------------------------------------------------------ the scripts refuse any client
async def test_a_foreign_client_is_refused_before_the_first_write(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    """The scripts check again what the client checked: a client that skips the Python
    checks (here: raw EVALSHA with the builders' own KEYS) gets EMQARG, nothing written."""
    lease, other = await _leased(queue, 2)
    k = queue.k
    before = {x.id: raw.hgetall(k.job(x.id)) for x in (lease, other)}
    big = b"r" * (b.MAX_RESULT + 1)
    cases = [
        ("complete", [k.active, k.job(lease.id), k.done, k.inflight, k.meta, k.finished],
         [lease.id, lease.attempt, 60_000, big, "t1"]),
        ("complete_batch", [k.active, k.done, k.inflight, k.meta, k.finished, k.job(lease.id),
                            k.job(other.id)],
         [60_000, "t2", lease.id, lease.attempt, b"", other.id, other.attempt, big]),
        ("retry", [k.active, k.job(lease.id), k.delayed, k.dead, k.inflight, k.pending, k.lanes,
                   k.meta, k.wake, k.done, k.finished, k.expiring],
         [lease.id, lease.attempt, 0, 5, "e" * (b.MAX_ERROR + 1), "fail", "t3"]),
        ("progress", [k.active, k.job(lease.id), k.meta],
         [lease.id, lease.attempt, b"p" * (b.MAX_PROGRESS + 1)]),
    ]
    workers = [queue_key(queue.name, "workers"), queue_key(queue.name, "workers:about"), k.meta]
    cases += [("worker_beat", workers, ["w" * (b.MAX_WORKER_NAME + 1), 1000, "{}"]),
              ("worker_beat", workers, ["w", 1000, "a" * (b.MAX_ABOUT + 1)]),
              ("worker_beat", workers, ["w", b.MAX_TTL_MS + 1, "{}"])]
    job = generate("JOB")  # admit is deny-oom, and checks the lane it keeps all the same
    admit_keys = [k.job(job), k.pending, k.delayed, k.lanes, k.meta, k.wake, k.expiring]
    cases.append(("admit", admit_keys, [job, b"x", "l" * 1025, 0, "0", "", 0, "", "", ""]))
    for bad_expiry in ("0", "5", "x", str(366 * 86_400_000 + 1)):  # 5: not more than delay_ms 5
        cases.append(("admit", admit_keys, [job, b"x", "", 5, "0", "", 0, "", "", bad_expiry]))
    for script, keys, args in cases:
        with pytest.raises(redis.ResponseError, match=r"^EMQARG"):
            raw.eval(load(script).source, len(keys), *keys, *args)
    assert {x.id: raw.hgetall(k.job(x.id)) for x in (lease, other)} == before
    assert raw.exists(k.job(job)) == 0
    assert raw.zcard(workers[0]) == 0


# ------------------------------------------------------------------ a real server at 4 MiB
LIMIT = 4 * 1024 * 1024
SLACK = 256 * 1024
"""What used_memory may exceed the limit by while every verb runs at it: the calls' own
row changes and at most OOM_ROOM (1 KiB) of client bytes each. A request's own argument
(up to 4 MiB for a batch) sits in the server's buffers while it is read, until the
server's cron reclaims it: the test waits for that, and bounds the transient peak too.
Without the bounds three 8 MiB results took this server to 41 MiB."""


@pytest.fixture
def small_server() -> Iterator[EmbeddedValkey]:
    with EmbeddedValkey(extra={"maxmemory": "4mb", "maxmemory-policy": "noeviction"}) as server:
        yield server


@pytest.fixture
async def small(small_server: EmbeddedValkey) -> AsyncIterator[AsyncConnector]:
    conn = AsyncConnector.from_url(small_server.url)
    yield conn
    await conn.aclose()


async def test_memory_stays_within_the_limit_plus_a_stated_slack_under_every_verb(
        small: AsyncConnector, small_server: EmbeddedValkey) -> None:
    raw = redis.Redis.from_url(small_server.url)
    q = AsyncQueue(small, "full", options=QueueOptions(max_attempts=100))
    # The whole bundle first: Valkey counts its script cache in used_memory (374 KiB with
    # all 42 scripts), and a script loaded on a verb's first use would be counted as that
    # verb's bytes (it was 51 KiB of this test's growth; decision 0054). The cache is the
    # server's, once, whatever the queue holds; the bound is about what the verbs write.
    for script in bundle().values():
        raw.script_load(script.source)
    await fill(q)
    leases = await q.claim(40, lease_ms=600_000)
    assert len(leases) == 40
    base = int(raw.info("memory")["used_memory"])  # filled: at (or just over) the limit
    peak, settled = 0, 0

    async def used() -> int:
        """used_memory once the request's own buffers are reclaimed (the server frees a big
        argument's buffers in its cron, within about a second): polled until it is within
        the bound or 5 s have passed. The first reading (the transient peak) is kept."""
        nonlocal peak, settled
        now = int(raw.info("memory")["used_memory"])
        peak = max(peak, now)
        for _ in range(100):
            if now <= LIMIT + SLACK:
                break
            await asyncio.sleep(0.05)
            now = int(raw.info("memory")["used_memory"])
        settled = max(settled, now)
        return now

    big_result, big_error = b"r" * b.MAX_RESULT, "e" * b.MAX_ERROR
    small_result = b"s" * b.OOM_ROOM
    it = iter(leases)
    for _ in range(3):  # the reproduction: three completions with the largest result
        with pytest.raises(ServerFull):
            await q.complete(next(it), big_result)
        assert await used() <= LIMIT + SLACK
    for _ in range(3):  # a batch of the largest results together
        with pytest.raises(ServerFull):
            await q.complete_many([next(it) for _ in range(8)], [big_result[: b.MAX_RESULTS // 8]] * 8)
        assert await used() <= LIMIT + SLACK
    for _ in range(3):  # the largest error: the failure counts, 1 KiB of its text is kept
        lease = next(it)
        assert await q.retry(lease, delay_ms=0, error=big_error) is RetryOutcome.SCHEDULED
        assert raw.hget(q.job_key(lease.id), "error") == big_error[: b.OOM_ROOM].encode()
        assert await used() <= LIMIT + SLACK
    for _ in range(3):  # progress is deny-oom: refused whole at the limit
        with pytest.raises(ServerFull):
            await q.report_progress(leases[-1], b"p" * b.MAX_PROGRESS)
        assert await used() <= LIMIT + SLACK
    workers = Registration(small, ["full"], about=lambda: {"x": "y" * (b.MAX_ABOUT - 16)})
    with pytest.raises(ServerFull):
        await workers.beat()  # a new registration past the limit: refused
    assert await used() <= LIMIT + SLACK
    # Small results still drain at the limit (at most OOM_ROOM bytes each), and the leases
    # refused above still complete.
    for lease in leases[:6]:
        assert await q.complete(lease, small_result) is Completion.COMPLETED
    assert await q.complete_many(leases[6:27], [b"ok"] * 21) == [Completion.COMPLETED] * 21
    assert await used() <= LIMIT + SLACK
    # The transient peak: the limit plus at most the slack and the largest request's bytes.
    assert peak <= LIMIT + SLACK + b.MAX_RESULTS + b.MAX_RESULTS // 8
    print(f"\nat a 4 MiB limit (filled to limit + {(base - LIMIT) // 1024} KiB): used_memory at "
          f"most limit + {(settled - LIMIT) // 1024} KiB once settled, limit + "
          f"{(peak - LIMIT) // 1024} KiB transient (stated slack 256 KiB)")
    raw.close()
