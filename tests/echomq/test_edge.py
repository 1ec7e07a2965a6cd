"""No ``redis`` exception type reaches a caller of echomq.

Every public method of the async and the blocking Queue and Connector (single server and
cluster) is called with bad arguments and against a dead server (a closed port). Bad
arguments raise InvalidArgument (a ValueError of echomq) *before any I/O*: against the
dead server they would otherwise be ServerUnavailable. The dead server gives
ServerUnavailable. The tables must name every public method: a new method without a case
fails the test.
"""

from __future__ import annotations

import dataclasses
import inspect
import socket
from collections.abc import Callable
from typing import Any

import pytest
import redis

from echomq import (
    AsyncClusterConnector,
    AsyncConnector,
    AsyncQueue,
    ClusterConnector,
    Connector,
    EchoMQError,
    InvalidArgument,
    Lease,
    Queue,
    QueueOptions,
    ScriptContractError,
    ServerError,
    ServerUnavailable,
    generate,
)
from echomq.protocol import Call
from echomq.protocol.gate import RateLimit
from echomq.protocol.scripts import load

Case = Callable[[Any, Lease], Any]


def _lease(name: str, queue: str | None = None) -> Lease:
    return Lease(queue=queue or name, id=generate("JOB"), attempt=1, payload=b"", lane=None,
                 deadline_ms=0)


# Queue methods: calls that must raise InvalidArgument before any I/O.
BAD: dict[str, list[Case]] = {
    "enqueue": [lambda q, x: q.enqueue("nope", b"x"), lambda q, x: q.enqueue(x.id, "text"),
                lambda q, x: q.enqueue(x.id, b"x" * 2000)],
    "admit": [lambda q, x: q.admit(x.id, b"x", delay_ms=10**30),
              lambda q, x: q.admit(x.id, b"x", delay_ms=-1),
              lambda q, x: q.admit(x.id, b"x", delay_ms=1.5),
              lambda q, x: q.admit(x.id, b"x", max_attempts=1.5),
              lambda q, x: q.admit(x.id, b"x", max_attempts=0),
              lambda q, x: q.admit(x.id, b"x", lane=""),
              lambda q, x: q.admit(x.id, b"x", lane=7),
              lambda q, x: q.admit(x.id, b"x", lane="l" * 300),
              lambda q, x: q.admit(x.id, b"x", lane="\ud800"),
              lambda q, x: q.admit(x.id, b"x", serial="yes"),
              lambda q, x: q.admit(x.id, b"x", dedupe_ms=-1),
              lambda q, x: q.admit(x.id, b"x", dedupe_mode="debounce"),
              lambda q, x: q.admit(x.id, b"x", dedupe_ms=10, dedupe_key="k" * 201),
              lambda q, x: q.admit(x.id, b"x", expires_ms=0),
              lambda q, x: q.admit(x.id, b"x", delay_ms=5, expires_ms=5)],
    "claim": [lambda q, x: q.claim(0, lease_ms=10), lambda q, x: q.claim(1, lease_ms=0),
              lambda q, x: q.claim(1, lease_ms=2**63), lambda q, x: q.claim(1, lease_ms=1.5),
              lambda q, x: q.claim(10**6, lease_ms=10), lambda q, x: q.claim(5, lease_ms=9, window=0)],
    "heartbeat": [lambda q, x: q.heartbeat(x, lease_ms=0), lambda q, x: q.heartbeat(x, lease_ms=2**40),
                  lambda q, x: q.heartbeat(object(), lease_ms=100)],
    "heartbeat_many": [lambda q, x: q.heartbeat_many([x], lease_ms=0),
                       lambda q, x: q.heartbeat_many([x, object()], lease_ms=100),
                       lambda q, x: q.heartbeat_many([x, _lease(q.name, "other")], lease_ms=100),
                       lambda q, x: q.heartbeat_many([x, dataclasses.replace(x, id="nope")],
                                                     lease_ms=100)],
    "complete": [lambda q, x: q.complete(x, "text"),
                 lambda q, x: q.complete(_lease(q.name, "other"))],
    "complete_many": [lambda q, x: q.complete_many([x], [b"a", b"b"]),
                      lambda q, x: q.complete_many([x], ["text"])],
    "settle": [lambda q, x: q.settle([], count=-1, lease_ms=10, candidates=[], window=0),
               lambda q, x: q.settle([], count=1, lease_ms=0, candidates=[], window=0),
               lambda q, x: q.settle([], count=1, lease_ms=10, candidates=[], window=-1)],
    "retry": [lambda q, x: q.retry(x, delay_ms=-1), lambda q, x: q.retry(x, delay_ms=10**30),
              lambda q, x: q.retry(x, delay_ms=0, error=5)],
    "defer": [lambda q, x: q.defer(x, delay_ms=-1)],
    "job": [lambda q, x: q.job("nope")],
    "job_key": [lambda q, x: q.job_key("nope")],
    "browse": [lambda q, x: q.browse("nope"), lambda q, x: q.browse("dead", limit=-1),
               lambda q, x: q.browse("dead", limit=10**6), lambda q, x: q.browse("dead", offset=-1)],
    "purge_dead": [lambda q, x: q.purge_dead(limit=-1), lambda q, x: q.purge_dead(limit=10**6),
                   lambda q, x: q.purge_dead(limit=1.5)],
    "requeue_dead": [lambda q, x: q.requeue_dead(limit=-1), lambda q, x: q.requeue_dead(limit=10**6)],
    "requeue": [lambda q, x: q.requeue(["nope"]), lambda q, x: q.requeue([]),
                lambda q, x: q.requeue(x.id)],
    "purge": [lambda q, x: q.purge("pending", [x.id]), lambda q, x: q.purge("dead", ["nope"])],
    "cancel": [lambda q, x: q.cancel([]), lambda q, x: q.cancel([x.id] * 1001)],
    "park": [lambda q, x: q.park("a|b", lease_ms=10, ttl_ms=10),
             lambda q, x: q.park("t", lease_ms=0, ttl_ms=10),
             lambda q, x: q.park("t", lease_ms=10, ttl_ms=-1)],
    "peek": [lambda q, x: q.peek("nope", 1), lambda q, x: q.peek("pending", -1),
             lambda q, x: q.peek("pending", 10**6), lambda q, x: q.peek("pending", 1, start=-1)],
    "set_limits": [lambda q, x: q.set_limits(rate=(3, 1000)),
                   lambda q, x: q.set_limits(lane_rate=RateLimit(101, 1000))],
    "result": [lambda q, x: q.result("nope"), lambda q, x: q.result(x.id, timeout=-1),
               lambda q, x: q.result(x.id, timeout=10**6), lambda q, x: q.result(x.id, timeout="1")],
    "progress": [lambda q, x: q.progress("nope")],
    "report_progress": [lambda q, x: q.report_progress(x, "text"),
                        lambda q, x: q.report_progress(x, b"x" * 65_537),
                        lambda q, x: q.report_progress(_lease(q.name, "other"), b"")],
    # enqueue_many/admit_many report bad items in place (asserted below); no argument-less
    # method has a bad call.
    "enqueue_many": [], "admit_many": [], "fence": [], "pending_size": [], "promote": [],
    "reap": [], "stats": [], "trim": [], "wake_subscription": [], "pause": [], "resume": [],
    "expire": [],
    "gate": [],
    "search": [lambda q, x: q.search(cursor="not a cursor"), lambda q, x: q.search(limit=0)],
    "admit_flow": [lambda q, x: q.admit_flow(parent=("nope", b""), children=[("edge", x.id, b"")]),
                   lambda q, x: q.admit_flow(parent=(x.id, b""), children=[("edge", x.id, b"")],
                                             on_child_failure="maybe"),
                   lambda q, x: q.admit_flow(parent=(x.id, b""),
                                             children=[("edge", generate("JOB"), b"", {"priority": 1})])],
    "children": [lambda q, x: q.children("nope")],
    "cancel_flow": [lambda q, x: q.cancel_flow("nope")],
}

# Queue methods with good arguments: against a dead server, ServerUnavailable.
GOOD: dict[str, Case] = {
    "enqueue": lambda q, x: q.enqueue(x.id, b"x"),
    "enqueue_many": lambda q, x: q.enqueue_many([(x.id, b"x")]),
    "admit": lambda q, x: q.admit(x.id, b"x", lane="a", delay_ms=5),
    "admit_many": lambda q, x: q.admit_many([(x.id, b"x", "a")]),
    "claim": lambda q, x: q.claim(1, lease_ms=100),
    "heartbeat": lambda q, x: q.heartbeat(x, lease_ms=100),
    "heartbeat_many": lambda q, x: q.heartbeat_many([x], lease_ms=100),
    "complete": lambda q, x: q.complete(x),
    "complete_many": lambda q, x: q.complete_many([x]),
    "settle": lambda q, x: q.settle([(x, b"")], count=1, lease_ms=100, candidates=[], window=4),
    "retry": lambda q, x: q.retry(x, delay_ms=0),
    "defer": lambda q, x: q.defer(x, delay_ms=10),
    "job": lambda q, x: q.job(x.id),
    "job_key": None,  # type: ignore[dict-item]  # no I/O at all
    "browse": lambda q, x: q.browse("dead"),
    "purge_dead": lambda q, x: q.purge_dead(),
    "requeue_dead": lambda q, x: q.requeue_dead(),
    "requeue": lambda q, x: q.requeue([x.id]),
    "purge": lambda q, x: q.purge("dead", [x.id]),
    "cancel": lambda q, x: q.cancel([x.id]),
    "park": lambda q, x: q.park("t1", lease_ms=100, ttl_ms=100),
    "result": lambda q, x: q.result(x.id, timeout=1),
    "progress": lambda q, x: q.progress(x.id),
    "report_progress": lambda q, x: q.report_progress(x, b"half"),
    "fence": lambda q, x: q.fence(),
    "pending_size": lambda q, x: q.pending_size(),
    "promote": lambda q, x: q.promote(),
    "reap": lambda q, x: q.reap(),
    "expire": lambda q, x: q.expire(),
    "stats": lambda q, x: q.stats(),
    "trim": lambda q, x: q.trim(),
    "peek": lambda q, x: q.peek("pending", 5),
    "wake_subscription": lambda q, x: q.wake_subscription(),
    "pause": lambda q, x: q.pause(),
    "resume": lambda q, x: q.resume(),
    "gate": lambda q, x: q.gate(),
    "set_limits": lambda q, x: q.set_limits(rate=RateLimit(3, 1000)),
    "search": lambda q, x: q.search(),
    "admit_flow": lambda q, x: q.admit_flow(parent=(x.id, b""), children=[("edge", generate("JOB"), b"")]),
    "children": lambda q, x: q.children(x.id),
    "cancel_flow": lambda q, x: q.cancel_flow(x.id),
}


def _conn_cases(kind: str) -> dict[str, Case]:
    """Connector methods with good arguments (a dead server answers ServerUnavailable)."""
    enq = load("enqueue")
    k = ["emq:{d}:job:JOB01", "emq:{d}:pending", "emq:{d}:wake", "emq:{d}:meta", "emq:{d}:parked",
         "emq:{d}:active", "emq:{d}:rate"]
    cases: dict[str, Case] = {
        "command": lambda c, x: c.command("PING"),
        "eval": lambda c, x: c.eval(enq, k, ["JOB01", b"x", ""]),
        "run": lambda c, x: c.run(Call(enq, k, ["JOB01", b"x", ""])),
        "pipeline": lambda c, x: c.pipeline([Call(enq, k, ["JOB01", b"x", ""])]),
        "flush": lambda c, x: c.flush([Call(enq, k, ["JOB01", b"x", ""])], [("ZCARD", k[1])]),
        "pipeline_wait": lambda c, x: c.pipeline_wait([Call(enq, k, ["JOB01", b"x", ""])], replicas=1,
                                                      timeout_ms=10),
        "load": lambda c, x: c.load(enq),
        "server_time_ms": lambda c, x: c.server_time_ms(),
        "wake_subscription": lambda c, x: c.wake_subscription("emq:{d}:wake"),
    }
    if kind == "cluster":
        cases.update({"refresh": lambda c, x: c.refresh(),
                      "node_for_key": lambda c, x: c.node_for_key("emq:{d}:pending")})
    return cases


CONN_BAD: dict[str, list[Case]] = {
    "eval": [lambda c, x: c.eval(load("enqueue"), [], [])],
    "run": [lambda c, x: c.run(Call(load("enqueue"), [], []))],
    "pipeline": [lambda c, x: c.pipeline([Call(load("stats"), ["a"], [])])],
    "flush": [lambda c, x: c.flush([Call(load("stats"), ["a"], [])])],
    "pipeline_wait": [lambda c, x: c.pipeline_wait([Call(load("stats"), ["a"], [])], replicas=1,
                                                   timeout_ms=1)],
    "node": [lambda c, x: c.node(("127.0.0.1", "port"))],
}
# Methods that are not I/O of their own: construction, closing, a property.
NOT_IO = {"from_url", "aclose", "close", "primaries", "node"}


async def _run(fn: Case, target: Any, lease: Lease) -> Any:
    result = fn(target, lease)
    if inspect.isawaitable(result):
        result = await result
    return result


def _assert_ours(exc: BaseException) -> None:
    assert isinstance(exc, EchoMQError), f"{type(exc).__module__}.{type(exc).__name__}: {exc}"
    assert not isinstance(exc, redis.exceptions.RedisError)


def _public(cls: type) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_")}


@pytest.fixture(scope="module")
def dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _dead(kind: str, blocking: bool, port: int) -> Any:
    if kind == "cluster":
        cls: Any = ClusterConnector if blocking else AsyncClusterConnector
        return cls([("127.0.0.1", port)], retry_budget_s=0.1, socket_timeout=0.5)
    cls = Connector if blocking else AsyncConnector
    return cls.from_url(f"redis://127.0.0.1:{port}", retry_budget_s=0.1, socket_timeout=0.5)


@pytest.mark.parametrize("blocking", [False, True], ids=["async", "blocking"])
@pytest.mark.parametrize("kind", ["single", "cluster"])
async def test_every_method_against_a_dead_server_raises_only_echomq_errors(
        kind: str, blocking: bool, dead_port: int) -> None:
    conn = _dead(kind, blocking, dead_port)
    q = (Queue if blocking else AsyncQueue)(conn, "edge", options=QueueOptions(max_payload=1000))
    lease = _lease("edge")
    assert _public(type(q)) == set(BAD) == set(GOOD)
    for name, cases in BAD.items():
        for i, case in enumerate(cases):
            with pytest.raises(InvalidArgument) as bad:  # before any I/O, or it would say so
                await _run(case, q, lease)
            _assert_ours(bad.value)
            assert not isinstance(bad.value.__cause__, redis.exceptions.RedisError), (name, i)
    for name, case in GOOD.items():
        if case is None:
            continue
        with pytest.raises(EchoMQError) as down:
            await _run(case, q, lease)
        _assert_ours(down.value)
        assert isinstance(down.value, ServerUnavailable), (name, down.value)
    # bad items of a batch: their typed error in place, nothing sent (no ServerUnavailable)
    got = await _run(lambda q, x: q.enqueue_many([("nope", b"x"), (x.id, "s"), (x.id,)]), q, lease)
    assert [type(e).__name__ for e in got] == ["InvalidJobId", "InvalidPayload", "InvalidArgument"]
    got = await _run(lambda q, x: q.admit_many([(x.id, b"x", ""), (x.id, b"x", 3)]), q, lease)
    assert all(type(e) is InvalidArgument for e in got)
    cases = _conn_cases(kind)
    assert _public(type(conn)) - NOT_IO == set(cases)
    if kind == "cluster":  # best effort by design: NOSCRIPT recovery loads on first use
        assert await _run(cases.pop("load"), conn, lease) is None
    for name, case in cases.items():
        with pytest.raises(EchoMQError) as down:
            await _run(case, conn, lease)
        _assert_ours(down.value)
        assert isinstance(down.value, ServerUnavailable), (name, down.value)
    for name, bad_cases in CONN_BAD.items():
        if name not in _public(type(conn)):
            continue
        for case in bad_cases:
            with pytest.raises((InvalidArgument, ScriptContractError)) as bad:
                await _run(case, conn, lease)
            _assert_ours(bad.value)
    closing = conn.close() if blocking else conn.aclose()
    if inspect.isawaitable(closing):
        await closing


async def test_a_live_server_error_is_typed_too(conn: AsyncConnector, sync_conn: Connector) -> None:
    sync_conn.command("SET", "edge:{x}:wrongtype", "a string")
    for target in (conn, sync_conn):
        for case, kind in [
            (lambda c, x: c.command("NOSUCHCOMMAND"), ServerError),
            (lambda c, x: c.command("SET", "edge:{x}", object()), InvalidArgument),
            (lambda c, x: c.command("HGET", "edge:{x}:wrongtype", "f"), ServerError),
        ]:
            with pytest.raises(EchoMQError) as caught:
                await _run(case, target, _lease("x"))
            _assert_ours(caught.value)
            assert isinstance(caught.value, kind), caught.value
