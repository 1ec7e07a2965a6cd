"""The redis-py fallback: a connection the bulk wire does not speak keeps redis-py's
pipeline, with the same guarantees. Two such connections, each test run on both:

* ``acl``: a credential provider logging in as an ACL user (created for the test on
  the single server, removed after);
* ``tls``: ``rediss://`` through a TLS front to the single server
  (``tests/echomq/tls_proxy.py``: the embedded server is built without TLS).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis
import redis.asyncio as redis_client
from redis.credentials import UsernamePasswordCredentialProvider

from echomq import AsyncConnector, AsyncQueue, Verdict, generate
from echomq import protocol as p
from echomq.core.errors import ConfigurationError
from tests.conftest import keys_of
from tests.echomq.tls_proxy import self_signed, tls_front


@pytest.fixture
def acl_user(valkey_url: str) -> Iterator[tuple[str, str]]:
    """An ACL user allowed everything on EchoMQ's keys, removed after the test."""
    name, password = f"emq-fallback-{os.getpid()}", "fallback-secret"
    admin = redis.Redis.from_url(valkey_url)
    admin.acl_setuser(name, enabled=True, passwords=[f"+{password}"], keys=["emq:*"],
                      channels=["*"], commands=["+@all"])
    try:
        yield name, password
    finally:
        admin.acl_deluser(name)
        admin.close()


def provider_conn(url: str, name: str, password: str) -> AsyncConnector:
    provider = UsernamePasswordCredentialProvider(name, password)
    client = redis_client.Redis.from_url(url, credential_provider=provider, socket_timeout=5.0)
    return AsyncConnector(client, retry_budget_s=2.0)


@pytest.fixture(scope="module")
def tls_cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return self_signed(tmp_path_factory.mktemp("tls"))


@pytest.fixture(params=["acl", "tls"])
async def fallback(request: pytest.FixtureRequest, valkey_url: str,
                   tls_cert: tuple[Path, Path]) -> AsyncIterator[AsyncConnector]:
    if request.param == "acl":
        async with provider_conn(valkey_url, *request.getfixturevalue("acl_user")) as conn:
            yield conn
        return
    with tls_front(valkey_url, *tls_cert) as url:
        async with AsyncConnector.from_url(url) as conn:
            yield conn


@pytest.fixture
def raw_single(valkey_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(valkey_url)
    yield client
    client.close()


def jid() -> str:
    return generate("JOB")


async def test_the_fallback_is_taken(fallback: AsyncConnector, qname: str) -> None:
    assert fallback.wire is None
    pool = fallback.client.connection_pool
    assert (pool.connection_kwargs.get("credential_provider") is not None
            or pool.connection_class.__name__ == "SSLConnection")
    assert await AsyncQueue(fallback, qname).enqueue(jid(), b"x") is Verdict.ENQUEUED


async def test_the_provider_logs_in_as_the_acl_user(
        valkey_url: str, acl_user: tuple[str, str], qname: str, raw_single: redis.Redis) -> None:
    async with provider_conn(valkey_url, *acl_user) as conn:
        assert (await conn.command("ACL", "WHOAMI")).decode() == acl_user[0]
        await AsyncQueue(conn, qname).enqueue_many([(jid(), b"x") for _ in range(3)])
        # the fallback's pooled connection is logged in as the ACL user
        assert [c for c in raw_single.client_list() if c["user"] == acl_user[0]]


async def test_bulk_admission_verdicts_in_order_with_errors_in_place(
        fallback: AsyncConnector, qname: str, raw_single: redis.Redis) -> None:
    q = AsyncQueue(fallback, qname)
    a, b = jid(), jid()
    got = await q.enqueue_many([(a, b"1"), (b, b"2"), (a, b"3"), (generate("ORD"), b"4")])
    assert got == [Verdict.ENQUEUED, Verdict.ENQUEUED, Verdict.DUPLICATE, Verdict.KIND]
    assert raw_single.hget(q.job_key(a), "payload") == b"1"
    assert await q.pending_size() == 2


async def test_noscript_inside_a_pipeline_is_recovered(
        fallback: AsyncConnector, qname: str, raw_single: redis.Redis) -> None:
    q = AsyncQueue(fallback, qname)
    await q.enqueue(jid(), b"warm")
    raw_single.script_flush()
    ids = [jid() for _ in range(50)]
    assert await fallback.pipeline([p.enqueue(q.k, i, b"x") for i in ids]) == [1] * 50
    raw_single.script_flush()
    assert await q.enqueue_many([(i, b"y") for i in ids]) == [Verdict.DUPLICATE] * 50
    assert await q.pending_size() == 51


async def test_claim_and_batched_completion_over_the_fallback(
        fallback: AsyncConnector, qname: str, raw_single: redis.Redis) -> None:
    q = AsyncQueue(fallback, qname)
    ids = [jid() for _ in range(5)]
    await q.enqueue_many([(i, b"p") for i in ids])
    leases = await q.claim(5, lease_ms=30_000)
    assert sorted(x.id for x in leases) == sorted(ids)
    await q.complete_many(leases)
    assert {raw_single.hget(q.job_key(i), "state") for i in ids} == {b"done"}
    assert (await q.stats()).done == 5


async def test_a_flush_of_calls_then_reads_is_one_exchange(
        fallback: AsyncConnector, qname: str) -> None:
    q = AsyncQueue(fallback, qname)
    a = jid()
    got = await fallback.flush([p.enqueue(q.k, a, b"x")], [("ZRANGE", f"emq:{{{qname}}}:pending", 0, -1)])
    assert got == [1, [a.encode()]]


async def test_pipeline_wait_counts_replicas_over_the_fallback(
        fallback: AsyncConnector, qname: str) -> None:
    q = AsyncQueue(fallback, qname)
    replies, acked = await fallback.pipeline_wait([p.enqueue(q.k, jid(), b"x")], replicas=0,
                                                  timeout_ms=100)
    assert replies == [1] and acked == [0]  # the single server has no replica


async def test_a_refused_permission_is_typed_in_place_and_writes_nothing(
        valkey_url: str, qname: str, raw_single: redis.Redis) -> None:
    name, password = f"emq-noeval-{os.getpid()}", "noeval-secret"
    raw_single.acl_setuser(name, enabled=True, passwords=[f"+{password}"], keys=["emq:*"],
                           commands=["+@all", "-evalsha", "-eval"])
    conn = provider_conn(valkey_url, name, password)
    try:
        q = AsyncQueue(conn, qname)
        got = await conn.pipeline([p.enqueue(q.k, jid(), b"x"), p.enqueue(q.k, jid(), b"y")])
        assert all(isinstance(r, ConfigurationError) and "NOPERM" in str(r) for r in got), got
        assert keys_of(raw_single, qname) == set()
    finally:
        await conn.aclose()
        raw_single.acl_deluser(name)
