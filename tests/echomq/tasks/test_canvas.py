"""Canvas on typed tasks (issue 27 item 2; decision 0041): signatures, chains, groups and
chords admitted as flows, run by the app's worker, on one server and on the 3+3 cluster
(the ``conn`` fixture), with the steps in queues on different cluster slots."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from echomq import App, InvalidArgument, JobFailed, Verdict, chain, chord, group
from echomq.tasks import GroupHandle
from tests.conftest import keys_of
from tests.echomq.tasks.support import running
from tests.echomq.test_flows import other_slot


@dataclasses.dataclass
class Total:
    n: int
    parts: list[int]


def _app(conn: Any, qname: str) -> tuple[App, Any, list[str]]:
    app = App(connector=conn, queue=qname)
    ran: list[str] = []
    far = other_slot(qname)

    @app.task()
    async def add(x: int, y: int) -> int:
        ran.append(f"add({x},{y})")
        return x + y

    @app.task(queue=far)
    def mul(x: int, y: int) -> int:  # a plain def, in a queue on another slot
        ran.append(f"mul({x},{y})")
        return x * y

    @app.task(queue=far)
    async def tsum(values: list[int]) -> Total:
        ran.append(f"tsum({values})")
        return Total(sum(values), values)

    @app.task()
    async def hello(name: str) -> str:
        ran.append(f"hello({name})")
        return f"hello {name}"

    @app.task(give_up_on=ValueError)  # gives up at once (max_attempts=1 would too: decision 0041)
    async def boom(x: int) -> int:
        ran.append(f"boom({x})")
        raise ValueError(f"boom {x}")

    return app, (add, mul, tsum, hello, boom), ran


async def test_a_chain_passes_each_result_to_the_next_step_across_slots(conn: Any, qname: str) -> None:
    app, (add, mul, _, hello, _), ran = _app(conn, qname)
    async with running(app, conn):
        handle = await app.admit(chain(add.s(2, 2), mul.s(10), add.s(1)))
        assert handle.verdict is Verdict.ENQUEUED and handle.task_name == add.name
        assert await handle.result(timeout=20) == 41  # add(mul(add(2, 2), 10), 1)
        assert ran == ["add(2,2)", "mul(4,10)", "add(40,1)"]
        piped = await app.admit(add.s(1, 1) | hello.si("ada"))  # immutable: no result passed
        assert await piped.result(timeout=20) == "hello ada"
        for one in (add.s(5, 5), chain(add.s(5, 6))):  # one job: the task's own admission
            assert await (await app.admit(one)).result(timeout=20) in (10, 11)
    assert ran[3:] == ["add(1,1)", "hello(ada)", "add(5,5)", "add(5,6)"]


async def test_a_chord_gets_the_group_results_in_order_and_a_group_alone_too(
        conn: Any, qname: str) -> None:
    app, (add, mul, tsum, _, _), ran = _app(conn, qname)
    members = [mul.s(i, 1) if i % 2 else add.s(i, 0) for i in range(12)]  # two queues
    async with running(app, conn):
        handle = await app.admit(chord(group(members), tsum.s()))
        total = await handle.result(timeout=20)
        assert total == Total(66, list(range(12)))  # in the group's order, not completion's
        alone = await app.admit(group(add.s(1, 1), mul.s(3, 3)))
        assert isinstance(alone, GroupHandle)
        assert await alone.result(timeout=20) == [2, 9]
        # a chord then a chain: the chord's callback feeds the next step
        nested = await app.admit(chain(group(add.s(1, 2), add.s(3, 4)), tsum.s(), add.si(5, 5)))
        assert await nested.result(timeout=20) == 10
    assert ran.count("tsum([3, 7])") == 1


async def test_a_failed_step_fails_the_steps_after_it_and_the_handle_raises(
        conn: Any, qname: str) -> None:
    app, (add, mul, _, _, boom), ran = _app(conn, qname)
    async with running(app, conn):
        handle = await app.admit(chain(add.s(1, 1), boom.s(), mul.s(3)))
        with pytest.raises(JobFailed) as failed:
            await handle.result(timeout=20)
        assert "dead" in str(failed.value)  # the parent's error names the child that died
    assert "mul" not in " ".join(ran)  # the step after the failure never ran


async def test_a_workflow_is_checked_whole_before_anything_is_written(
        conn: Any, raw: Any, qname: str) -> None:
    app, (add, mul, tsum, _, _), _ = _app(conn, qname)
    refused = {
        "a group after a step": chain(add.s(1, 1), group(add.s(2), add.s(3)), tsum.s()),
        "a chain ending in a group": chain(add.s(1, 1), group(add.s(2))),
        "a wrong argument in the last step": chain(add.s(1, 1), mul.s("ten")),
        "too many arguments": chain(add.s(1, 1), add.s(2, 3)),
        "a first step without its arguments": chain(add.s(1), mul.s(2)),
    }
    for what, wf in refused.items():
        with pytest.raises(InvalidArgument):
            await app.admit(wf)
        assert keys_of(raw, qname) | keys_of(raw, other_slot(qname)) == set(), what
    with pytest.raises(InvalidArgument):
        chain()
    with pytest.raises(InvalidArgument):
        group([])
    with pytest.raises(InvalidArgument):
        chord([add.s(1, 1)], "not a signature")  # type: ignore[arg-type]


async def test_the_sync_twin_admits_a_chain_and_waits_for_its_result(
        sync_conn: Any, conn: Any, qname: str) -> None:
    app, (add, mul, tsum, _, _), _ = _app(conn, qname)
    app._sync_connector = sync_conn
    async with running(app, conn):
        one = await asyncio.to_thread(app.admit_sync, chain(add.s(2, 3), mul.s(2)))
        two = await asyncio.to_thread(app.admit_sync, chord([add.s(1, 1), add.s(2, 2)], tsum.s()))
        assert await asyncio.to_thread(one.result, timeout=20) == 10
        assert await asyncio.to_thread(two.result, timeout=20) == Total(6, [2, 4])
