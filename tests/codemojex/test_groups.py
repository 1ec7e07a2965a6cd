"""Group commit (codemojex.infra.groups): concurrent calls share flushes, each gets its own
answer, a failure reaches every caller of its flush, a cancelled caller cancels no flush."""

from __future__ import annotations

import asyncio

import pytest

from codemojex.infra.groups import GroupCommit


class _Recorder:
    def __init__(self, gate: asyncio.Event | None = None, fail: bool = False) -> None:
        self.flushes: list[list[int]] = []
        self.gate = gate
        self.fail = fail

    async def __call__(self, items: list[int]) -> list[int]:
        self.flushes.append(items)
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            raise ValueError("the flush failed")
        return [i * 10 for i in items]


async def test_a_call_alone_is_a_flush_of_one() -> None:
    rec = _Recorder()
    group = GroupCommit(rec, max_items=8, flushes=1)
    assert await group.call(3) == 30
    assert rec.flushes == [[3]] and (group.batches, group.items) == (1, 1)


async def test_calls_that_wait_for_a_flush_share_the_next_one_each_with_its_own_answer() -> None:
    gate = asyncio.Event()
    rec = _Recorder(gate)
    group = GroupCommit(rec, max_items=3, flushes=1)
    first = asyncio.create_task(group.call(0))
    await asyncio.sleep(0)  # the first flush is in flight, holding [0]
    rest = [asyncio.create_task(group.call(i)) for i in range(1, 6)]
    await asyncio.sleep(0)
    gate.set()
    assert await first == 0 and [await t for t in rest] == [10, 20, 30, 40, 50]
    assert rec.flushes == [[0], [1, 2, 3], [4, 5]]  # in order, at most max_items each


async def test_a_failed_flush_fails_each_of_its_callers_and_the_next_flush_runs() -> None:
    rec = _Recorder(fail=True)
    group = GroupCommit(rec, max_items=8, flushes=1)
    calls = [asyncio.create_task(group.call(i)) for i in range(3)]
    for task in calls:
        with pytest.raises(ValueError, match="the flush failed"):
            await task
    rec.fail = False
    assert await group.call(7) == 70


async def test_a_cancelled_caller_does_not_cancel_the_flush_of_the_others() -> None:
    gate = asyncio.Event()
    rec = _Recorder(gate)
    group = GroupCommit(rec, max_items=8, flushes=1)
    a = asyncio.create_task(group.call(1))
    b = asyncio.create_task(group.call(2))
    await asyncio.sleep(0)
    a.cancel()
    await asyncio.sleep(0)
    gate.set()
    assert await b == 20
    assert a.cancelled() and rec.flushes == [[1, 2]]


async def test_a_flush_that_answers_the_wrong_number_of_results_is_an_error() -> None:
    async def short(items: list[int]) -> list[int]:
        return items[:-1]

    group = GroupCommit(short, max_items=8, flushes=1)
    with pytest.raises(RuntimeError, match="returned 0 results"):
        await group.call(1)


def test_bounds_are_checked() -> None:
    with pytest.raises(ValueError, match="must be >= 1"):
        GroupCommit(_Recorder(), max_items=0)


async def test_a_flush_runs_in_the_context_of_its_first_caller() -> None:
    import contextvars

    var: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")
    seen: list[str] = []

    async def flush(items: list[str]) -> list[str]:
        seen.append(var.get())
        await asyncio.sleep(0)
        return items

    group = GroupCommit(flush, max_items=8, flushes=1)

    async def call_as(who: str) -> str:
        var.set(who)
        return await group.call(who)

    first = asyncio.create_task(call_as("first"))
    await asyncio.sleep(0)  # its flush is in flight
    assert await asyncio.gather(call_as("second"), call_as("third")) == ["second", "third"]
    await first
    assert seen == ["first", "second"]  # not the first caller's context for the next batch


async def test_a_call_that_arrives_as_the_last_drain_ends_is_flushed_without_another_call() -> None:
    """A call whose first step runs after the drain saw nothing waiting and returned, but
    before any done-callback of the drain's task: it must start a drain of its own (it once
    found the slot still taken and waited for a next call that may never come)."""
    loop = asyncio.get_running_loop()
    late: list[asyncio.Task[int]] = []
    group: GroupCommit[int, int]

    async def flush(items: list[int]) -> list[int]:
        if not late:  # scheduled now, it runs just before the drain wakes up to answer [1]
            loop.call_soon(lambda: late.append(asyncio.create_task(group.call(2))))
        return [i * 10 for i in items]

    group = GroupCommit(flush, max_items=8, flushes=1)
    assert await group.call(1) == 10
    assert await asyncio.wait_for(late[0], 5) == 20  # a hang, not a time: no other call comes
