"""Exact verdicts after a resend (docs/protocol.md, "Call tokens"): a reply lost on the wire
after the server acted makes the connector send the same call again; the resend answers
what the first send earned (ENQUEUED, not DUPLICATE; COMPLETED, not STALE; the retry's
verdict, not STALE), on one server and on the cluster. The wire fault is real: a TCP
proxy (:mod:`tests.echomq.reply_drop`) forwards the call, waits for the server's reply and
closes the client's connection instead of passing it on."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis

from echomq import (
    AsyncClusterConnector,
    AsyncConnector,
    AsyncQueue,
    Completion,
    Connector,
    Lease,
    Queue,
    QueueOptions,
    RetryOutcome,
    Verdict,
    generate,
)
from echomq.core.cluster_url import Addr
from tests.echomq.invariants import assert_consistent
from tests.echomq.reply_drop import ReplyDrop


class _Through(AsyncClusterConnector):
    """The cluster connector, its node at ``remap``'s keys reached through the proxy."""

    remap: dict[Addr, Addr] = {}  # noqa: RUF012 (set per instance below)

    def node(self, addr: Addr) -> Any:
        return super().node(self.remap.get(addr, addr))


def _proxied(url: str, port: int) -> str:
    parts = urlsplit(url)
    auth = parts.netloc.rpartition("@")[0]
    return urlunsplit(parts._replace(netloc=f"{auth}@127.0.0.1:{port}" if auth else f"127.0.0.1:{port}"))


@pytest.fixture
async def through(backend: str, backend_url: str, qname: str) -> AsyncIterator[tuple[Any, ReplyDrop]]:
    """A connector whose calls for ``qname`` pass through a :class:`ReplyDrop` proxy."""
    if backend == "single":
        parts = urlsplit(backend_url)
        with ReplyDrop(parts.hostname or "127.0.0.1", parts.port or 6379) as proxy:
            conn = AsyncConnector.from_url(_proxied(backend_url, proxy.port))
            yield conn, proxy
            await conn.aclose()
        return
    plain = AsyncClusterConnector.from_url(backend_url)
    addr = await plain.node_for_key(f"emq:{{{qname}}}:pending")  # the queue's primary
    await plain.aclose()
    with ReplyDrop(*addr) as proxy:
        cluster = _Through.from_url(backend_url)
        cluster.remap = {addr: ("127.0.0.1", proxy.port)}
        yield cluster, proxy
        await cluster.aclose()


async def _lease(q: AsyncQueue, job: str) -> Lease:
    await q.enqueue(job, b"p")
    [lease] = await q.claim(1, lease_ms=60_000)
    assert lease.id == job
    return lease


async def test_a_resent_enqueue_answers_enqueued(through: tuple[Any, ReplyDrop], qname: str,
                                                 raw: redis.Redis) -> None:
    conn, proxy = through
    q = AsyncQueue(conn, qname)
    assert await q.enqueue(generate("JOB"), b"warm") is Verdict.ENQUEUED  # the script is loaded
    job = generate("JOB")
    proxy.drop_reply_to(job.encode())
    assert await q.enqueue(job, b"x") is Verdict.ENQUEUED  # not DUPLICATE: the first send's
    assert proxy.dropped == 1
    assert await q.enqueue(job, b"x") is Verdict.DUPLICATE  # another call: a duplicate
    assert list(assert_consistent(raw, qname).values()) == ["pending"] * 2  # admitted once


async def test_a_resent_admit_answers_enqueued(through: tuple[Any, ReplyDrop], qname: str) -> None:
    conn, proxy = through
    q = AsyncQueue(conn, qname)
    assert await q.admit(generate("JOB"), b"warm", lane="l1") is Verdict.ENQUEUED
    job = generate("JOB")
    proxy.drop_reply_to(job.encode())
    assert await q.admit(job, b"x", lane="l1", priority=2) is Verdict.ENQUEUED
    assert proxy.dropped == 1
    assert await q.admit(job, b"x", lane="l1") is Verdict.DUPLICATE


async def test_a_resent_batch_admission_answers_each_first_verdict(
        through: tuple[Any, ReplyDrop], qname: str) -> None:
    conn, proxy = through
    q = AsyncQueue(conn, qname)
    known = generate("JOB")
    assert await q.enqueue(known, b"before") is Verdict.ENQUEUED  # a genuine duplicate below
    fresh = [generate("JOB") for _ in range(40)]
    pairs = [(j, b"x") for j in fresh[:20]] + [(known, b"x")] + [(j, b"x") for j in fresh[20:]]
    assert await q.enqueue_many([(generate("JOB"), b"warm")] * 1) == [Verdict.ENQUEUED]
    proxy.drop_reply_to(fresh[5].encode())
    verdicts = await q.enqueue_many(pairs)
    assert proxy.dropped == 1
    assert verdicts == [Verdict.ENQUEUED] * 20 + [Verdict.DUPLICATE] + [Verdict.ENQUEUED] * 20
    assert (await q.stats()).pending == 42


async def test_a_resent_complete_answers_completed(through: tuple[Any, ReplyDrop], qname: str,
                                                   raw: redis.Redis) -> None:
    conn, proxy = through
    q = AsyncQueue(conn, qname)
    warm = await _lease(q, generate("JOB"))
    assert await q.complete(warm) is Completion.COMPLETED
    lease = await _lease(q, generate("JOB"))
    proxy.drop_reply_to(lease.id.encode())
    assert await q.complete(lease, b"result") is Completion.COMPLETED  # not STALE
    assert proxy.dropped == 1
    assert await q.complete(lease, b"result") is Completion.STALE  # another call: stale
    assert await q.result(lease.id) == b"result"
    assert list(assert_consistent(raw, qname).values()) == ["done"] * 2


async def test_a_resent_complete_batch_answers_each_first_verdict(
        through: tuple[Any, ReplyDrop], qname: str) -> None:
    conn, proxy = through
    q = AsyncQueue(conn, qname)
    warm = await _lease(q, generate("JOB"))
    assert await q.complete_many([warm]) == [Completion.COMPLETED]
    a, b = await _lease(q, generate("JOB")), await _lease(q, generate("JOB"))
    gone = await _lease(q, generate("JOB"))
    assert await q.complete(gone) is Completion.COMPLETED  # stale in the batch below
    proxy.drop_reply_to(b.id.encode())
    assert await q.complete_many([a, gone, b]) == [Completion.COMPLETED, Completion.STALE,
                                                   Completion.COMPLETED]
    assert proxy.dropped == 1
    assert await q.complete_many([a, b]) == [Completion.STALE, Completion.STALE]


@pytest.mark.parametrize(("attempts", "earned"), [(3, RetryOutcome.SCHEDULED), (1, RetryOutcome.DEAD)])
async def test_a_resent_retry_answers_its_first_verdict(
        through: tuple[Any, ReplyDrop], qname: str, attempts: int, earned: RetryOutcome) -> None:
    conn, proxy = through
    q = AsyncQueue(conn, qname, options=QueueOptions(max_attempts=attempts))
    warm = await _lease(q, generate("JOB"))
    assert await q.defer(warm, delay_ms=60_000) is RetryOutcome.SCHEDULED
    lease = await _lease(q, generate("JOB"))
    proxy.drop_reply_to(lease.id.encode())
    assert await q.retry(lease, delay_ms=0, error="boom") is earned  # not STALE
    assert proxy.dropped == 1
    if earned is RetryOutcome.SCHEDULED:  # claimed again at once: the resend still knew
        [again] = await q.claim(1, lease_ms=60_000)
        assert (again.id, again.attempt) == (lease.id, 2)
    assert await q.retry(lease, delay_ms=0, error="boom") is RetryOutcome.STALE


def test_a_resent_blocking_enqueue_answers_enqueued(valkey_url: str, qname: str) -> None:
    """The generated blocking connector resends the same call, token and all."""
    parts = urlsplit(valkey_url)
    with ReplyDrop(parts.hostname or "127.0.0.1", parts.port or 6379) as proxy:
        conn = Connector.from_url(_proxied(valkey_url, proxy.port))
        q = Queue(conn, qname)
        assert q.enqueue(generate("JOB"), b"warm") is Verdict.ENQUEUED
        job = generate("JOB")
        proxy.drop_reply_to(job.encode())
        assert q.enqueue(job, b"x") is Verdict.ENQUEUED
        assert proxy.dropped == 1
        assert q.enqueue(job, b"x") is Verdict.DUPLICATE
        conn.close()
