"""Periodic jobs: tick arithmetic (pure), the ``schedule`` script and the schedulers,
on the single server and on the cluster (the ``backend`` fixture runs each test on both)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import redis

from echomq import (
    AsyncConnector,
    AsyncQueue,
    AsyncScheduler,
    Connector,
    InvalidArgument,
    Missed,
    ProtocolVersionError,
    Queue,
    Schedule,
    Scheduler,
    ScriptContractError,
    ids,
    tick_of,
)
from echomq.protocol import Call
from echomq.protocol.schedules import decode_schedule
from tests.conftest import keys_of

T0 = 1_767_225_600_000  # 2026-01-01 00:00:00 UTC


# ------------------------------------------------------------------ pure
def test_interval_ticks() -> None:
    s = Schedule(name="i", queue="q", every_ms=50, offset_ms=10)
    assert s.latest(1000) == 960 and s.latest(1010) == 1010 and s.next_after(1010) == 1060
    assert s.ticks(900, 1061, 10) == [910, 960, 1010, 1060]
    assert s.ticks(900, 1061, 2) == [1010, 1060]  # the newest ones


def test_cron_ticks_in_utc() -> None:
    s = Schedule(name="c", queue="q", cron="*/5 * * * *")
    assert s.latest(T0) == T0 and s.latest(T0 - 1) == T0 - 300_000
    assert s.next_after(T0) == T0 + 300_000 and s.next_after(T0 - 1) == T0
    assert s.ticks(T0 - 900_000, T0 + 1, 10) == [T0 - 600_000, T0 - 300_000, T0]
    sec = Schedule(name="s", queue="q", cron="* * * * * */2")  # seconds: the sixth field
    assert sec.ticks(T0, T0 + 6_999, 10) == [T0 + 2000, T0 + 4000, T0 + 6000]


def test_missed_tick_policy() -> None:
    skip = Schedule(name="a", queue="q", every_ms=100)
    catch = Schedule(name="a", queue="q", every_ms=100, missed=Missed.CATCH_UP, max_catch_up=3)
    assert skip.due(None, 10_000) == [] and catch.due(None, 10_000) == []  # first sight: next tick
    assert skip.due(9_000, 10_050) == [10_000]
    assert catch.due(9_000, 10_050) == [9_800, 9_900, 10_000]
    assert catch.due(10_000, 10_050) == [] and skip.due(10_000, 10_099) == []
    assert Schedule(name="a", queue="q", every_ms=100, missed="catch_up").missed is Missed.CATCH_UP


def test_job_ids_derive_from_name_and_tick() -> None:
    a = Schedule(name="report", queue="q", every_ms=1000)
    assert a.job_id(T0) == Schedule(name="report", queue="other", cron="* * * * *").job_id(T0)
    assert a.job_id(T0) != Schedule(name="report2", queue="q", every_ms=1000).job_id(T0)
    assert ids.valid(a.job_id(T0)) and tick_of(a.job_id(T0)) == T0
    assert a.job_id(T0) < a.job_id(T0 + 1000)  # admission order follows the ticks


@pytest.mark.parametrize("kw", [
    {"name": "", "every_ms": 100}, {"name": "a b", "every_ms": 100}, {"name": "a{b}", "every_ms": 100},
    {"name": "x" * 101, "every_ms": 100}, {"name": "a"}, {"name": "a", "every_ms": 100, "cron": "* * * * *"},
    {"name": "a", "every_ms": 9}, {"name": "a", "every_ms": 100, "offset_ms": 100},
    {"name": "a", "cron": "not a cron"}, {"name": "a", "cron": "* * * * *", "offset_ms": 5},
    {"name": "a", "every_ms": 100, "payload": "text"}, {"name": "a", "every_ms": 100, "lane": ""},
    {"name": "a", "every_ms": 100, "max_attempts": 0}, {"name": "a", "every_ms": 100, "missed": "later"},
    {"name": "a", "every_ms": 100, "max_catch_up": 0}, {"name": "a", "every_ms": True},
    {"name": "a", "every_ms": 100, "timeout_ms": 0}, {"name": "a", "every_ms": 100, "priority": 4},
    {"name": "a", "every_ms": 100, "priority": -1}, {"name": "a", "every_ms": 100, "timeout_ms": 1.5},
    {"name": "a", "every_ms": 100, "queue": "{x}"},
])
def test_bad_schedules_are_typed_errors(kw: dict[str, object]) -> None:
    with pytest.raises(InvalidArgument):
        Schedule(**({"queue": "q"} | kw))  # type: ignore[arg-type]


def test_bad_schedulers_are_typed_errors() -> None:
    s = Schedule(name="a", queue="q", every_ms=100)
    conn = AsyncConnector.from_url("redis://127.0.0.1:1")  # never used: refused first
    for bad in ([], [s, s], ["a"]):
        with pytest.raises(InvalidArgument):
            AsyncScheduler(conn, bad)  # type: ignore[arg-type]


# ------------------------------------------------------------------ the script
def _mark(raw: redis.Redis, s: Schedule) -> int:
    return int(raw.hget(f"emq:{{{s.queue}}}:sched:{s.name}", "last") or -1)


async def test_first_sight_sets_the_mark_then_each_tick_is_admitted_once(
        conn: AsyncConnector, qname: str, raw: redis.Redis) -> None:
    s = Schedule(name="every", queue=qname, every_ms=1000)
    now = await conn.server_time_ms()
    floor = s.latest(now) - 5000
    first = decode_schedule(await conn.run(s.call([], floor=floor)))
    assert first.mark == floor and first.admitted == [] and abs(first.now_ms - now) < 60_000
    ticks = s.ticks(floor, now, 100)  # five or six due ticks
    got = decode_schedule(await conn.run(s.call(ticks)))
    assert got.admitted == [s.job_id(t) for t in ticks] and got.mark == ticks[-1]
    again = decode_schedule(await conn.run(s.call(ticks)))  # a second scheduler, late
    assert again.admitted == [] and again.mark == ticks[-1]
    q = AsyncQueue(conn, qname)
    assert (await q.stats()).pending == len(ticks)
    row = await q.job(s.job_id(ticks[0]))
    assert row is not None and row["state"] == b"pending"
    # a floor never moves an existing mark
    decode_schedule(await conn.run(s.call([], floor=0)))
    assert _mark(raw, s) == ticks[-1]


async def test_a_tick_at_or_below_the_mark_is_never_admitted_again_even_after_its_row_is_gone(
        conn: AsyncConnector, qname: str, raw: redis.Redis) -> None:
    s = Schedule(name="once", queue=qname, every_ms=1000)
    tick = s.latest(await conn.server_time_ms())
    await conn.run(s.call([], floor=tick - 1000))
    assert decode_schedule(await conn.run(s.call([tick]))).admitted == [s.job_id(tick)]
    raw.delete(f"emq:{{{qname}}}:job:{s.job_id(tick)}")  # as retention would, later
    raw.zrem(f"emq:{{{qname}}}:pending", s.job_id(tick))
    assert decode_schedule(await conn.run(s.call([tick - 1000, tick]))).admitted == []
    assert not raw.exists(f"emq:{{{qname}}}:job:{s.job_id(tick)}")


async def test_a_tick_the_server_clock_has_not_reached_is_not_admitted(
        conn: AsyncConnector, qname: str, raw: redis.Redis) -> None:
    s = Schedule(name="later", queue=qname, every_ms=1000)
    now = await conn.server_time_ms()
    await conn.run(s.call([], floor=s.latest(now) - 1000))
    due, future = s.latest(now), s.latest(now) + 60_000  # a client whose clock runs ahead
    got = decode_schedule(await conn.run(s.call([due, future])))
    assert got.admitted == [s.job_id(due)] and got.mark == due
    assert not raw.exists(f"emq:{{{qname}}}:job:{s.job_id(future)}")


async def test_bad_calls_are_refused_before_any_write(conn: AsyncConnector, qname: str,
                                                      raw: redis.Redis) -> None:
    s = Schedule(name="bad", queue=qname, every_ms=1000)
    tick = s.latest(await conn.server_time_ms())
    good = s.call([tick - 1000, tick])
    backwards = Call(good.script, [*good.keys[:5], good.keys[6], good.keys[5]],
                     [*good.args[:8], good.args[9], good.args[8]])
    with pytest.raises(InvalidArgument, match="EMQARG ticks must strictly increase"):
        await conn.run(backwards)
    wrong_name = Call(good.script, good.keys, ["other", *good.args[1:]])
    with pytest.raises(ScriptContractError, match="EMQKEYS"):
        await conn.run(wrong_name)
    bad_floor = Call(good.script, good.keys, [good.args[0], "-5", *good.args[2:]])
    with pytest.raises(InvalidArgument, match="EMQARG floor"):
        await conn.run(bad_floor)
    for at, value, word in ((6, "0", "timeout_ms"), (7, "4", "priority"), (7, "", "priority")):
        args = list(good.args)
        args[at] = value
        with pytest.raises(InvalidArgument, match=f"EMQARG {word}"):
            await conn.run(Call(good.script, good.keys, args))
    assert keys_of(raw, qname) == set()


async def test_a_schedule_gives_each_tick_its_timeout_and_priority(
        conn: AsyncConnector, qname: str, raw: redis.Redis) -> None:
    q = AsyncQueue(conn, qname)
    s = Schedule(name="opts", queue=qname, every_ms=1000, timeout_ms=2500, priority=3)
    plain = Schedule(name="plain", queue=qname, every_ms=1000)
    tick = s.latest(await conn.server_time_ms())
    for sched in (plain, s):
        await conn.run(sched.call([], floor=tick - 1000))
        assert decode_schedule(await conn.run(sched.call([tick]))).admitted == [sched.job_id(tick)]
    row = await q.job(s.job_id(tick))
    assert row is not None and row["timeout"] == b"2500" and row["prio"] == b"3"
    bare = await q.job(plain.job_id(tick))
    assert bare is not None and "timeout" not in bare and "prio" not in bare
    # the priority orders the claim: the later schedule's tick is leased first, with its timeout
    first = (await q.claim(1, lease_ms=30_000))[0]
    assert first.id == s.job_id(tick) and first.timeout_ms == 2500


async def test_another_major_version_is_refused_and_nothing_changes(
        conn: AsyncConnector, qname: str, raw: redis.Redis) -> None:
    s = Schedule(name="v", queue=qname, every_ms=1000)
    tick = s.latest(await conn.server_time_ms())
    raw.hset(f"emq:{{{qname}}}:meta", "protocol", "echomq:4.0.0")
    with pytest.raises(ProtocolVersionError):
        await conn.run(s.call([tick], floor=tick - 1000))
    assert keys_of(raw, qname) == {f"emq:{{{qname}}}:meta"}


# ------------------------------------------------------------------ schedulers
async def test_catch_up_admits_the_newest_missed_ticks_oldest_first(
        conn: AsyncConnector, qname: str, raw: redis.Redis) -> None:
    s = Schedule(name="cu", queue=qname, every_ms=1000, missed=Missed.CATCH_UP, max_catch_up=4,
                 payload=b"p", lane="reports", max_attempts=2)
    now = await conn.server_time_ms()
    raw.hset(f"emq:{{{qname}}}:sched:cu", "last", s.latest(now) - 10_000)  # ten ticks missed
    fired = await AsyncScheduler(conn, [s]).tick()
    after = await conn.server_time_ms()
    ticks = [t for _, t, _ in fired]
    # The newest missed ticks, oldest first, ending at the last tick due on the server's
    # clock when the call ran (a tick may come due between `now` and the call). Four, or
    # three when the scheduler's estimate of the server clock asked for a tick one moment
    # early: the script refuses a tick later than its own TIME.
    latest = ticks[-1]
    assert s.latest(now) <= latest <= s.latest(after), (now, ticks, after)
    assert ticks == list(range(ticks[0], latest + 1, 1000)) and len(ticks) in (3, 4), ticks
    assert ticks[0] > s.latest(now) - 10_000  # nothing at or before the mark
    row = await AsyncQueue(conn, qname).job(s.job_id(latest))
    assert row is not None and row["payload"] == b"p" and row["lane"] == b"reports" and row["max"] == b"2"


async def test_skip_admits_only_the_newest_missed_tick(conn: AsyncConnector, qname: str,
                                                       raw: redis.Redis) -> None:
    s = Schedule(name="sk", queue=qname, every_ms=60_000)
    now = await conn.server_time_ms()
    raw.hset(f"emq:{{{qname}}}:sched:sk", "last", s.latest(now) - 600_000)
    fired = await AsyncScheduler(conn, [s]).tick()
    after = await conn.server_time_ms()  # a tick may come due between `now` and the call
    assert [t for _, t, _ in fired] in ([s.latest(now)], [s.latest(after)])
    assert (await AsyncQueue(conn, qname).stats()).pending == 1


async def test_a_new_schedule_starts_at_its_next_tick(conn: AsyncConnector, qname: str,
                                                      raw: redis.Redis) -> None:
    s = Schedule(name="new", queue=qname, every_ms=60_000, missed=Missed.CATCH_UP)
    sched = AsyncScheduler(conn, [s])
    assert await sched.tick() == []  # nothing from the past
    assert await sched.tick() == []
    assert _mark(raw, s) == s.latest(await conn.server_time_ms())
    assert keys_of(raw, qname) == {f"emq:{{{qname}}}:sched:new"}


async def test_two_schedulers_in_one_loop_admit_each_tick_once(conn: AsyncConnector, qname: str,
                                                              raw: redis.Redis) -> None:
    s = Schedule(name="two", queue=qname, every_ms=50, missed=Missed.CATCH_UP, max_catch_up=1000)
    a, b = AsyncScheduler(conn, [s], name="a"), AsyncScheduler(conn, [s], name="b")
    runs = [asyncio.create_task(x.run()) for x in (a, b)]
    deadline = time.monotonic() + 60
    while a.admitted + b.admitted < 20 and time.monotonic() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    a.stop()
    b.stop()
    await asyncio.gather(*runs)
    total = a.admitted + b.admitted
    assert total >= 20
    jobs = sorted(k.split(":job:")[1] for k in keys_of(raw, qname) if ":job:" in k)
    ticks = [tick_of(j) for j in jobs]
    # each tick once: contiguous ticks, each its derived id. The schedulers' own count may be
    # short of the server's, never over it: the cluster connector resends a script whose reply
    # was lost (a moved slot, a dropped connection) and the resend answers DUPLICATE for the
    # job the first send admitted (seen once: 150 jobs, 149 counted)
    assert total <= len(jobs) and ticks == list(range(ticks[0], ticks[-1] + 1, 50))
    assert jobs == [s.job_id(t) for t in ticks]


def test_the_blocking_scheduler_admits_each_tick_once(sync_conn: Connector, qname: str,
                                                      raw: redis.Redis) -> None:
    s = Schedule(name="blocking", queue=qname, every_ms=50, missed=Missed.CATCH_UP, max_catch_up=1000)
    scheds = [Scheduler(sync_conn, [s], name=n) for n in "ab"]
    threads = [threading.Thread(target=x.run) for x in scheds]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while sum(x.admitted for x in scheds) < 10 and time.monotonic() < deadline:
        time.sleep(0.05)
    for x in scheds:
        x.stop()
    for t in threads:
        t.join(30)
    total = sum(x.admitted for x in scheds)
    assert total >= 10 and Queue(sync_conn, qname).stats().pending == total
    ticks = sorted(tick_of(k.split(":job:")[1]) for k in keys_of(raw, qname) if ":job:" in k)
    assert ticks == list(range(ticks[0], ticks[-1] + 1, 50))


# ------------------------------------------------------------------ worker and command line
async def test_a_worker_with_schedules_runs_each_tick_once(conn: AsyncConnector, qname: str) -> None:
    from echomq import Lease
    from echomq.ops.worker import Worker, WorkerSettings
    from tests.echomq._async.support import wait_for

    ran: list[str] = []

    async def handle(job: Lease) -> None:
        ran.append(job.id)

    s = Schedule(name="w", queue=qname, every_ms=50, missed=Missed.CATCH_UP)
    settings = WorkerSettings(handlers={qname: handle}, schedules=[s], beat_ms=20, lease_ms=5000)
    workers = [Worker(settings, connector=conn, name=f"sched-worker-{i}") for i in range(2)]
    tasks = [asyncio.create_task(w.run()) for w in workers]
    try:
        async def enough() -> bool:
            return len(ran) >= 10
        await wait_for(enough, within=60)
    finally:
        for w in workers:
            w.stop()
        await asyncio.gather(*tasks)
    assert len(ran) == len(set(ran))  # each tick's job ran once
    ticks = sorted(tick_of(j) for j in ran)
    assert ticks == list(range(ticks[0], ticks[-1] + 1, EVERY))  # claimed in tick order
    assert all(w.scheduler is not None for w in workers)
    # stop() stopped each scheduler itself, not only by the cancel a connector call can lose
    assert all(w.scheduler._stopped for w in workers if w.scheduler is not None)
    assert sum(w.scheduler.admitted for w in workers if w.scheduler is not None) >= len(ran)


EVERY = 50


def test_worker_settings_refuse_a_bad_schedule_list() -> None:
    from echomq.ops.worker import WorkerSettings
    from tests.echomq import worker_targets

    s = Schedule(name="a", queue="q", every_ms=100)
    with pytest.raises(InvalidArgument):
        WorkerSettings(handlers={"q": worker_targets.ok}, schedules=[s, s])


def test_the_schedule_command(valkey_url: str, qname: str, tmp_path: Path) -> None:
    (tmp_path / "periodic.py").write_text(
        "from echomq import Missed, Schedule\n"
        f"EVERY = Schedule(name='cli', queue={qname!r}, every_ms=600_000, missed=Missed.SKIP)\n"
        "NOT_ONE = 42\n")
    cmd = [sys.executable, "-c", "from echomq.ops.cli import main; main()", "schedule"]
    client = redis.Redis.from_url(valkey_url)
    # The three runs must not straddle a tick (every ten minutes): in the last minute
    # before one, wait for it to pass (a bounded wait, one time in ten).
    deadline = time.monotonic() + 70
    while True:
        sec, usec = client.time()
        into = (int(sec) * 1000 + int(usec) // 1000) % 600_000
        if into < 540_000 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    client.close()
    run = lambda *a: subprocess.run([*cmd, *a], cwd=tmp_path, capture_output=True, text=True,  # noqa: E731
                                    timeout=120)
    first = run("periodic:EVERY", "--url", valkey_url, "--once")
    assert first.returncode == 0 and first.stdout == "", first.stderr  # first sight: next tick
    client = redis.Redis.from_url(valkey_url)
    try:
        key = f"emq:{{{qname}}}:sched:cli"
        mark = int(client.hget(key, "last") or 0)
        client.hset(key, "last", mark - 600_000)  # as if a tick was missed
        second = run("periodic:EVERY", "--url", valkey_url, "--once")
        s = Schedule(name="cli", queue=qname, every_ms=600_000)
        assert second.returncode == 0, second.stderr
        assert second.stdout == f"{qname} cli tick {mark} admitted {s.job_id(mark)}\n"
        assert client.exists(f"emq:{{{qname}}}:job:{s.job_id(mark)}")
        third = run("periodic:EVERY", "--url", valkey_url, "--once")
        assert third.returncode == 0 and third.stdout == ""
    finally:
        client.close()
    bad = run("periodic:NOT_ONE", "--url", valkey_url, "--once")
    assert bad.returncode != 0 and "Traceback" not in bad.stderr and len(bad.stderr.splitlines()) == 1
    assert "not a Schedule" in bad.stderr
    gone = run("nowhere:EVERY", "--url", valkey_url, "--once")
    assert gone.returncode != 0 and "Traceback" not in gone.stderr and "cannot import" in gone.stderr
