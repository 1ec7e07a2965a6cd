"""Least privilege: the queue's producer, consumer and dashboard flows run as ACL users
with only the rules of :mod:`echomq.client.acl`, and each is refused what its role does not need."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import redis

from echomq import AsyncConnector, AsyncQueue, Lease, Verdict, generate
from echomq.client.acl import ROLES, acl_rules, setuser
from echomq.client.info import server_info
from echomq.client.registry import Registration
from echomq.core.eviction import check_eviction_policy
from echomq.core.outcomes import Backoff, Defer
from echomq.protocol.scripts import bundle
from echomq.runtime.consumer import Consumer, ConsumerOptions
from echomq.servers.server import EmbeddedValkey
from tests.echomq.invariants import assert_consistent

Q = "orders"
DENIED = "(?i)NOPERM|no permissions"  # a plain command, a key, a command inside a script


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddedValkey]:
    with EmbeddedValkey() as s:
        admin = redis.Redis.from_url(s.url)
        for role in ROLES:
            admin.execute_command(*setuser(role, f"pw-{role}", role, queues=[Q]))
        admin.close()
        yield s


@pytest.fixture
def admin(server: EmbeddedValkey) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(server.url)
    yield client
    client.close()


@pytest.fixture
async def as_role(server: EmbeddedValkey) -> AsyncIterator[Any]:
    conns: list[AsyncConnector] = []

    def connect(role: str) -> AsyncConnector:
        conn = AsyncConnector.from_url(f"redis://{role}:pw-{role}@{server.host}:{server.port}",
                                       retry_budget_s=1)
        conns.append(conn)
        return conn

    yield connect
    for c in conns:
        await c.aclose()


def test_the_rules_name_only_queue_keys_and_no_dangerous_command() -> None:
    for role in ROLES:
        rules = acl_rules(role, [Q])
        assert rules[:2] == ["reset", "-@all"]
        assert [r for r in rules if r.startswith("~")] == ["~emq:{orders}:*"]
        for bad in ("+keys", "+flushall", "+flushdb", "+config", "+eval", "+debug", "+@all", "+acl"):
            assert bad not in rules, (role, bad)
    assert "+hset" not in acl_rules("dashboard-readonly", [Q])
    # A producer never deletes a key (ZREM and HDEL it needs since the hand-off: an admission
    # leases to a parked consumer through the claim gate). Since an admission runs every
    # command a plain claim does, what keeps a producer from claiming is EVALSHA limited to
    # its own scripts' SHA1s.
    producer = acl_rules("producer", [Q])
    assert "+del" not in producer and "+evalsha" not in producer
    sha = {name: f"+evalsha|{s.sha}" for name, s in bundle().items()}
    assert sha["enqueue"] in producer and sha["admit"] in producer
    assert sha["enqueue_batch"] in producer  # enqueue_many's runs of plain jobs (decision 0027)
    assert sha["throttle"] in producer and sha["debounce"] in producer  # dedupe windows
    assert sha["claim"] not in producer and sha["complete"] not in producer
    assert sha["claim"] in acl_rules("worker", [Q])
    assert not {sha[w] for w in ("requeue", "purge", "cancel", "pause")} & set(
        acl_rules("dashboard-readonly", [Q]))


async def test_producer_worker_and_dashboard_flows_run_as_their_users(
        as_role: Any, admin: redis.Redis) -> None:
    producer = AsyncQueue(as_role("producer"), Q)
    jobs = [generate("JOB") for _ in range(60)]
    assert (await producer.enqueue_many([(j, b"ok") for j in jobs])).count(Verdict.ENQUEUED) == 60
    fail, later, lane = generate("JOB"), generate("JOB"), generate("JOB")
    assert await producer.enqueue(fail, b"fail") is Verdict.ENQUEUED
    assert await producer.admit(later, b"ok", delay_ms=200) is Verdict.ENQUEUED
    assert await producer.admit(lane, b"defer", lane="L", serial=True) is Verdict.ENQUEUED
    w = {"dedupe_ms": 60_000, "dedupe_key": "acl"}  # dedupe windows: throttle, debounce
    assert await producer.admit(generate("JOB"), b"ok", **w) is Verdict.ENQUEUED
    assert await producer.admit(generate("JOB"), b"ok", **w) is Verdict.DUPLICATE
    for verdict in (Verdict.ENQUEUED, Verdict.REPLACED):
        assert await producer.admit(generate("JOB"), b"ok", dedupe_ms=60_000, dedupe_key="acl-d",
                                    dedupe_mode="debounce") is verdict

    wconn = as_role("worker")
    assert await check_eviction_policy(wconn) == {}  # INFO is granted: the policy is read
    deferred: set[str] = set()

    async def handler(lease: Lease) -> Backoff | Defer | None:
        if lease.payload == b"fail":
            return Backoff(error="no", delay_ms=5)
        if lease.payload == b"defer" and lease.id not in deferred:
            deferred.add(lease.id)
            return Defer(20)
        return None

    from echomq.core.model import QueueOptions

    wq = AsyncQueue(wconn, Q, options=QueueOptions(max_attempts=2, keep_done_ms=0))
    consumer = Consumer(wq, handler, options=ConsumerOptions(beat_ms=20, lease_ms=1000, trim_every=1))
    registration = Registration(wconn, [Q], name="acl-worker", beat_s=0.1, ttl_s=1.0)
    await registration.beat()
    task = asyncio.create_task(consumer.run())
    # A lost lease, reaped by the worker's own maintenance.
    lost = generate("JOB")
    assert await producer.enqueue(lost, b"ok") is Verdict.ENQUEUED
    for _ in range(500):
        s = await wq.stats()
        if s.pending + s.active + s.delayed == 0 and s.dead == 1:
            break
        await asyncio.sleep(0.02)
    consumer.stop()
    await task
    assert consumer.stats.errors == 0
    assert consumer.stats.dead == 1 and consumer.stats.deferred == 1
    where = assert_consistent(admin, Q)
    assert where.get(fail) == "dead"
    assert (await wq.stats()).pending == 0

    dash = AsyncQueue(as_role("dashboard"), Q)
    ro_conn = as_role("dashboard-readonly")
    ro = AsyncQueue(ro_conn, Q)
    assert (await ro.stats()).dead == 1
    assert [v.id for v in await ro.browse("dead")] == [fail]
    assert (await ro.job(fail) or {}).get("error") == b"no"
    info = await server_info(ro_conn)  # SCAN finds the queue; the info script reads it
    assert Q in {q.name for q in info.queues}
    assert "acl-worker" in {w.name for q in info.queues for w in q.workers}
    with pytest.raises(Exception, match=DENIED):
        await ro.requeue_dead()
    assert await dash.requeue_dead() == 1
    assert await dash.purge_dead() == 0
    assert (await dash.stats()).pending == 1


async def test_each_role_is_refused_what_it_does_not_need(as_role: Any, admin: redis.Redis) -> None:
    producer = AsyncQueue(as_role("producer"), Q)
    assert await producer.enqueue(generate("JOB"), b"x") is Verdict.ENQUEUED
    with pytest.raises(Exception, match=DENIED):
        await producer.claim(1, lease_ms=1000)  # a producer cannot take jobs
    with pytest.raises(Exception, match=DENIED):
        await AsyncQueue(as_role("producer"), "other").enqueue(generate("JOB"), b"x")  # nor other queues
    worker = as_role("worker")
    for command in (("KEYS", "*"), ("FLUSHALL",), ("CONFIG", "GET", "maxmemory"),
                    ("GET", "secret"), ("EVAL", "return 1", 0)):
        with pytest.raises(Exception, match=DENIED):
            await worker.command(*command)
    with pytest.raises(Exception, match=DENIED):
        await as_role("dashboard-readonly").command("DEL", f"emq:{{{Q}}}:pending")
    assert admin.exists(f"emq:{{{Q}}}:pending")


async def test_a_flow_runs_as_a_producer_and_a_worker_of_both_queues(
        server: EmbeddedValkey, admin: redis.Redis) -> None:
    """A producer admits a flow over two queues and a worker relays and repairs it, each
    with only its role's rules on those two queues (decision 0038)."""
    other = Q + "-kids"
    for role in ("producer", "worker"):
        admin.execute_command(*setuser(f"flow-{role}", f"pw-{role}", role, queues=[Q, other]))
    url = f"{server.host}:{server.port}"
    prod = AsyncConnector.from_url(f"redis://flow-producer:pw-producer@{url}", retry_budget_s=1)
    work = AsyncConnector.from_url(f"redis://flow-worker:pw-worker@{url}", retry_budget_s=1)
    try:
        pid, kid = generate("JOB"), generate("JOB")
        assert await AsyncQueue(prod, Q).admit_flow(parent=(pid, b"p"), children=[(other, kid, b"k")])
        kids = AsyncQueue(work, other)
        (lease,) = await kids.claim(1, lease_ms=60_000)
        await kids.complete(lease, b"r")
        assert (await kids.flows.relay(other)).released == 1
        assert await kids.flows.repair(other, older_than_ms=0) == (0, 0)
        row = await AsyncQueue(work, Q).job(pid)
        assert row is not None and row["state"] == b"pending"
    finally:
        await prod.aclose()
        await work.aclose()


def test_the_roles_table_in_docs_is_what_acl_rules_gives() -> None:
    """docs/reliability.md's table of the four roles (rules and scripts, for a queue named
    ``orders``) is a claim: each row is rebuilt here from ``acl_rules`` and the role's plan
    (it had gone stale: the flow scripts, ``object|encoding`` and ``hincrby`` missing)."""
    from pathlib import Path

    from echomq.client.acl import _PLAN

    text = (Path(__file__).parents[2] / "docs" / "reliability.md").read_text(encoding="utf-8")
    for role in ROLES:
        rules = [r for r in acl_rules(role, ["orders"])
                 if r not in ("reset", "-@all") and not r.startswith("+evalsha|")]
        cells = " ".join(rules).replace("|", "\\|")
        row = f"| {role} | `{cells}` | {', '.join(sorted(_PLAN[role][0]))} |"
        assert row in text, f"docs/reliability.md's {role} row should read:\n{row}"
