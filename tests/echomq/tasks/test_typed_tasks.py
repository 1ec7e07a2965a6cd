"""Typed tasks (issue 26, items 1-4): declared, admitted with the function's own signature
(checked before any I/O), run by the worker, results decoded to the annotated type, errors
typed. Each test runs on one server and on the 3+3 cluster (the ``conn`` fixture)."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import msgspec
import pydantic
import pytest

from echomq import (
    App,
    AsyncQueue,
    BackoffPolicy,
    Hooks,
    InvalidArgument,
    JobCancelled,
    JobFailed,
    RetryOutcome,
    TaskContext,
    Verdict,
    derive_id,
)
from echomq.core.ids import timestamp_ms
from echomq.tasks import MsgspecSerializer
from tests.conftest import keys_of
from tests.echomq.tasks.support import running


@dataclasses.dataclass
class Order:
    id: int
    items: list[str]


class Receipt(msgspec.Struct):
    order: int
    total: float


class Point:  # a type msgspec does not know: the serializer's hooks carry it
    def __init__(self, x: int, y: int) -> None:
        self.x, self.y = x, y


class User(pydantic.BaseModel):
    name: str
    age: int


def make_app(conn: Any, queue: str, **kw: Any) -> App:
    app = App(connector=conn, queue=queue, **kw)

    @app.task()
    async def add(a: int, b: int, scale: float = 1.0) -> float:
        return (a + b) * scale

    @app.task(key=lambda order: f"order-{order.id}", lane=lambda order: f"customer-{order.id % 2}")
    def checkout(order: Order) -> Receipt:  # a plain def: run in the app's threads
        return Receipt(order=order.id, total=float(len(order.items)))

    return app


async def test_admit_runs_the_task_and_the_result_decodes_to_the_annotated_type(
        conn: Any, qname: str) -> None:
    app = make_app(conn, qname)
    add, checkout = app.tasks[f"{__name__}.make_app.<locals>.add"], app.tasks[
        f"{__name__}.make_app.<locals>.checkout"]
    async with running(app, conn):
        h = await add.admit(2, 3, scale=0.5)
        assert h.verdict is Verdict.ENQUEUED
        assert await h.result(timeout=10) == 2.5
        r = await checkout.admit(Order(7, ["a", "b"]))
        got = await r.result(timeout=10)
    assert got == Receipt(order=7, total=2.0) and isinstance(got, Receipt)
    row = await AsyncQueue(conn, qname).job(r.id)
    assert row is not None and row["lane"] == b"customer-1"


async def test_a_wrong_type_or_a_missing_argument_is_refused_before_any_write(
        conn: Any, qname: str, raw: Any) -> None:
    app = make_app(conn, qname)
    add = next(t for t in app.tasks.values() if t.name.endswith("add"))
    checkout = next(t for t in app.tasks.values() if t.name.endswith("checkout"))
    with pytest.raises(InvalidArgument, match="'a'"):
        await add.admit("2", 3)
    with pytest.raises(InvalidArgument, match="missing"):
        await add.admit(2)
    with pytest.raises(InvalidArgument, match="unexpected"):
        await add.admit(2, 3, 4.0, extra=1)
    with pytest.raises(InvalidArgument, match="'a'"):
        await add.admit(True, 3)  # a bool is not an int
    with pytest.raises(InvalidArgument, match="order"):
        await checkout.admit(Order(1, [1, 2]))  # type: ignore[list-item]
    with pytest.raises(InvalidArgument, match="item 1"):
        await add.admit_many([(1, 2), ("x", 2)])
    assert keys_of(raw, qname) == set()


async def test_options_override_delay_and_priority_for_one_call(conn: Any, qname: str) -> None:
    app = make_app(conn, qname)
    add = next(t for t in app.tasks.values() if t.name.endswith("add"))
    h = await add.options(delay_ms=60_000, priority=2).admit(1, 2)
    row = await AsyncQueue(conn, qname).job(h.id)
    assert row is not None and row["state"] == b"delayed"
    plain = await add.admit(1, 2)
    row = await AsyncQueue(conn, qname).job(plain.id)
    assert row is not None and row["state"] == b"pending"
    with pytest.raises(InvalidArgument):
        add.options(nope=1)


async def test_the_same_business_key_twice_answers_duplicate(conn: Any, qname: str) -> None:
    app = make_app(conn, qname)
    checkout = next(t for t in app.tasks.values() if t.name.endswith("checkout"))
    first = await checkout.admit(Order(42, ["a"]))
    again = await checkout.admit(Order(42, ["b"]))
    assert (first.verdict, again.verdict) == (Verdict.ENQUEUED, Verdict.DUPLICATE)
    assert first.id == again.id  # the refused call's handle is the first job's
    # The key is the job's dedupe key (docs/decisions/0043); its id is an ordinary one.
    assert await AsyncQueue(conn, qname).job(first.id) is not None
    assert timestamp_ms(first.id) > 0 and first.id != derive_id("JOB", "order-42", namespace=checkout.name)


async def test_a_lane_or_key_of_none_means_no_lane_and_a_fresh_id(conn: Any, qname: str) -> None:
    app = App(connector=conn, queue=qname)

    @app.task(lane="tenant", key=lambda tenant, ref: ref)
    async def job(tenant: str | None, ref: str | None) -> None: ...

    q = AsyncQueue(conn, qname)
    a, b = await job.admit(None, None), await job.admit(None, None)
    assert (a.verdict, b.verdict) == (Verdict.ENQUEUED, Verdict.ENQUEUED) and a.id != b.id
    c = await job.admit("acme", "r-1")
    assert (await job.admit("acme", "r-1")).id == c.id != derive_id("JOB", "r-1", namespace=job.name)
    rows = [await q.job(h.id) for h in (a, c)]
    assert [r.get("lane") if r else "?" for r in rows] == [None, b"acme"]


async def test_admit_many_answers_in_input_order_and_runs_each(conn: Any, qname: str) -> None:
    app = make_app(conn, qname)
    add = next(t for t in app.tasks.values() if t.name.endswith("add"))
    checkout = next(t for t in app.tasks.values() if t.name.endswith("checkout"))
    keyed = await checkout.admit_many([(Order(1, []),), checkout.call(Order(2, ["x"])), (Order(1, ["y"]),)])
    assert [getattr(h, "verdict", h) for h in keyed] == [Verdict.ENQUEUED, Verdict.ENQUEUED,
                                                         Verdict.DUPLICATE]
    handles = await add.admit_many([(i, i) for i in range(300)] + [add.call(1, 1, scale=3.0)])
    async with running(app, conn):
        got = [await h.result(timeout=20) for h in handles if not isinstance(h, Exception)]
    assert got == [2.0 * i for i in range(300)] + [6.0]


async def test_a_dead_task_raises_job_failed_with_the_remote_exception(conn: Any, qname: str) -> None:
    app = App(connector=conn, queue=qname)

    @app.task(max_attempts=2, backoff=BackoffPolicy(base_ms=1, jitter=0.0))
    async def boom(n: int) -> int:
        raise LookupError(f"no such thing {n}")

    async with running(app, conn):
        h = await boom.admit(5)
        with pytest.raises(JobFailed) as failed:
            await h.result(timeout=10)
    err = failed.value
    assert (err.remote_type, err.remote_message, err.failures) == ("LookupError", "no such thing 5", 2)
    assert "raise LookupError" in err.remote_traceback


async def test_give_up_on_and_retry_on_shape_the_retries(conn: Any, qname: str) -> None:
    app = App(connector=conn, queue=qname)
    runs: dict[str, int] = {}

    @app.task(max_attempts=5, give_up_on=ValueError, backoff=BackoffPolicy(base_ms=1, jitter=0.0))
    def give_up(tag: str) -> None:
        runs[tag] = runs.get(tag, 0) + 1
        raise ValueError("hopeless") if tag == "v" else RuntimeError("maybe later")

    @app.task(max_attempts=5, retry_on=(ConnectionError,), backoff=BackoffPolicy(base_ms=1, jitter=0.0))
    async def flaky(tag: str) -> str:
        runs[tag] = runs.get(tag, 0) + 1
        if tag == "c" and runs[tag] < 3:
            raise ConnectionError("try again")
        if tag == "k":
            raise KeyError("not retried")
        return tag

    async with running(app, conn):
        v, r = await give_up.admit("v"), await give_up.admit("r")
        c, k = await flaky.admit("c"), await flaky.admit("k")
        assert await c.result(timeout=10) == "c"
        for h, failures in ((v, 1), (r, 5), (k, 1)):
            with pytest.raises(JobFailed) as failed:
                await h.result(timeout=10)
            assert failed.value.failures == failures
    assert runs == {"v": 1, "r": 5, "c": 3, "k": 1}


async def test_a_cancelled_job_raises_job_cancelled(conn: Any, qname: str) -> None:
    app = make_app(conn, qname)
    add = next(t for t in app.tasks.values() if t.name.endswith("add"))
    h = await add.options(delay_ms=60_000).admit(1, 1)
    await h.cancel()
    with pytest.raises(JobCancelled):
        await h.result(timeout=5)


async def test_the_context_is_given_to_a_task_that_asks_for_it(conn: Any, qname: str) -> None:
    app = App(connector=conn, queue=qname)
    seen: list[Any] = []

    @app.task()
    async def job(ctx: TaskContext, n: int) -> int:
        await ctx.progress(f"half of {n}")
        seen.append((ctx.attempt, ctx.cancel.is_set(), ctx.id))
        return n

    @app.task()
    def blocking(n: int, *, ctx: TaskContext) -> int:
        ctx.progress_sync(b"thread")
        return n * 2

    async with running(app, conn):
        h, b = await job.admit(4), await blocking.admit(n=4)
        assert (await h.result(timeout=10), await b.result(timeout=10)) == (4, 8)
    assert seen == [(1, False, h.id)]
    q = AsyncQueue(conn, qname)
    assert (await q.progress(h.id), await q.progress(b.id)) == (b"half of 4", b"thread")


async def test_msgpack_and_a_custom_hook_serializer(conn: Any, qname: str) -> None:
    def enc(value: Any) -> Any:
        if isinstance(value, Point):
            return [value.x, value.y]
        raise NotImplementedError

    def dec(type_: type, value: Any) -> Any:
        if type_ is Point:
            return value if isinstance(value, Point) else Point(*value)
        raise NotImplementedError

    app = App(connector=conn, queue=qname,
              serializer=MsgspecSerializer("msgpack", enc_hook=enc, dec_hook=dec))

    @app.task()
    async def norm(p: Point) -> int:
        return abs(p.x) + abs(p.y)

    _, payload, _ = norm.prepare((Point(3, -4),), {})
    assert payload.startswith(b"EMQT1 msgpack ")
    async with running(app, conn):
        assert await (await norm.admit(Point(3, -4))).result(timeout=10) == 7


async def test_a_pydantic_model_travels_as_an_argument_and_a_result(conn: Any, qname: str) -> None:
    app = App(connector=conn, queue=qname)

    @app.task()
    async def older(user: User) -> User:
        return user.model_copy(update={"age": user.age + 1})

    with pytest.raises(InvalidArgument):
        await older.admit({"name": "ada"})
    async with running(app, conn):
        got = await (await older.admit(User(name="ada", age=36))).result(timeout=10)
    assert isinstance(got, User) and got.age == 37


def test_declaring_refuses_what_cannot_be_typed() -> None:
    app = App(url="redis://127.0.0.1:1")
    with pytest.raises(InvalidArgument, match=r"\*args"):
        app.task(lambda *a: None, name="star")
    with pytest.raises(InvalidArgument, match="names no parameter"):
        app.task(key="nope")(lambda x: x)
    keyed = app.task(key="x", name="keyed")(lambda x: x)
    assert keyed.prepare((7,), {})[0] == derive_id("JOB", "7", namespace="keyed")  # a flow step's id
    window = keyed._prepare((7,), {})[3]
    assert window is not None and window.key == derive_id("JOB", "7", namespace="keyed")
    with pytest.raises(InvalidArgument, match="priority"):
        app.task(priority=9)
    app.task(name="one")(lambda: None)
    with pytest.raises(InvalidArgument, match="twice"):
        app.task(name="one")(lambda: None)


async def test_an_app_without_a_url_says_so(qname: str) -> None:
    app = App(queue=qname)

    @app.task()
    async def f() -> None: ...

    with pytest.raises(InvalidArgument, match="no url"):
        await f.admit()
    await asyncio.sleep(0)


async def test_a_retry_that_gives_up_ends_the_job_dead_at_its_first_failure(conn: Any, qname: str) -> None:
    q = AsyncQueue(conn, qname)
    job = derive_id("JOB", "give-up", namespace=qname)
    assert await q.admit(job, b"", max_attempts=10) is Verdict.ENQUEUED
    (lease,) = await q.claim(1, lease_ms=5000)
    assert await q.retry(lease, delay_ms=0, error="ValueError: no", give_up=True) is RetryOutcome.DEAD
    row = await q.job(job)
    assert row is not None and (row["state"], row["failures"]) == (b"dead", b"1")
    with pytest.raises(InvalidArgument):
        await q.retry(lease, delay_ms=0, give_up=1)  # type: ignore[arg-type]


async def test_a_running_task_asked_to_stop_is_cancelled_and_its_job_ends_cancelled(
        conn: Any, qname: str) -> None:
    app = App(connector=conn, queue=qname)
    started, stopped = asyncio.Event(), asyncio.Event()

    @app.task()
    async def long(n: int) -> int:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            stopped.set()
            raise
        return n

    async with running(app, conn):
        h = await long.admit(1)
        await asyncio.wait_for(started.wait(), 10)
        await h.cancel()
        with pytest.raises(JobCancelled):
            await h.result(timeout=10)
        await asyncio.wait_for(stopped.wait(), 10)


async def test_a_task_past_its_timeout_fails_with_handler_timeout(conn: Any, qname: str) -> None:
    app = App(connector=conn, queue=qname)

    @app.task(timeout_ms=100, max_attempts=1)
    async def slow() -> None:
        await asyncio.sleep(30)

    async with running(app, conn):
        with pytest.raises(JobFailed) as failed:
            await (await slow.admit()).result(timeout=10)
    assert failed.value.remote_type == "HandlerTimeout"


async def test_the_workers_failure_hooks_see_a_task_error_its_policy_shaped(conn: Any, qname: str) -> None:
    app = App(connector=conn, queue=qname)
    seen: list[tuple[str, BaseException]] = []

    @app.task(give_up_on=KeyError, max_attempts=5)
    async def lookup(k: str) -> str:
        raise KeyError(k)

    hooks = Hooks(on_failure=[lambda lease, error, seconds: seen.append((lease.id, error))])
    async with running(app, conn, hooks=hooks):
        h = await lookup.admit("nope")
        with pytest.raises(JobFailed) as failed:
            await h.result(timeout=10)
    assert failed.value.failures == 1  # given up at once, not retried five times
    assert [(i, type(e)) for i, e in seen] == [(h.id, KeyError)]
