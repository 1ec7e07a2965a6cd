"""A sharded queue is one queue to every client: a plain client on its name is refused
(issue 29 item 3, first point; docs/decisions/0020, "Amendment").

Before, ``AsyncQueue(conn, "orders")`` on a sharded queue answered ENQUEUED into
``emq:{orders}:*``, where no sharded consumer looks: the job was stranded.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis

from echomq import AsyncQueue, AsyncShardedQueue, Lease, generate
from echomq.core.errors import ProtocolVersionError, ShardCountMismatch
from echomq.protocol import codes
from echomq.protocol.scripts import load
from echomq.protocol.sharding import SHARDED
from tests.conftest import keys_of


async def test_a_plain_client_on_a_sharded_name_is_refused_and_writes_nothing(
        conn: Any, qname: str, raw: redis.Redis) -> None:
    sharded = AsyncShardedQueue(conn, qname, shards=3)
    assert await sharded.enqueue(generate("JOB"), b"sharded") is not None
    plain = AsyncQueue(conn, qname)
    before = keys_of(raw, qname)
    job = generate("JOB")
    refusals = [plain.enqueue(job, b"stranded?"), plain.admit(job, b"x", lane="l"),
                plain.claim(1, lease_ms=1000), plain.fence(), plain.pause(), plain.stats()]
    for call in refusals:
        with pytest.raises(ShardCountMismatch, match="sharded queue"):
            await call
    (verdict,) = await plain.enqueue_many([(job, b"x")])  # answers per item
    assert isinstance(verdict, ShardCountMismatch)
    assert keys_of(raw, qname) == before  # nothing written under the logical name
    assert raw.exists(plain.job_key(job)) == 0
    # The sharded client still works, and sees its job.
    assert (await sharded.stats()).pending == 1


async def test_a_foreign_client_on_a_sharded_name_is_refused_by_the_fence(
        conn: Any, qname: str, raw: redis.Redis) -> None:
    await AsyncShardedQueue(conn, qname, shards=2).open()
    plain = AsyncQueue(conn, qname)
    k = plain.keys
    job = generate("JOB")
    with pytest.raises(redis.ResponseError, match=f"^EMQVERSION queue speaks {SHARDED}"):
        raw.eval(load("admit").source, 7, plain.job_key(job), k["pending"], k["delayed"],
                 k["lanes"], k["meta"], k["wake"], k["expiring"], job, b"x", "", 0, "0", "", 0,
                 "", "", "")
    assert raw.exists(plain.job_key(job)) == 0


async def test_a_name_a_plain_client_used_cannot_become_sharded(conn: Any, qname: str) -> None:
    plain = AsyncQueue(conn, qname)
    await plain.enqueue(generate("JOB"), b"plain")
    with pytest.raises(ShardCountMismatch, match="plain queue"):
        await AsyncShardedQueue(conn, qname, shards=3).enqueue(generate("JOB"), b"x")
    assert (await plain.stats()).pending == 1  # the plain queue is untouched


def test_the_refusal_is_typed_from_the_reply() -> None:
    exc = codes.error_from_reply(f"EMQVERSION queue speaks {SHARDED}, client speaks echomq:3.0.0")
    assert isinstance(exc, ShardCountMismatch) and isinstance(exc, ProtocolVersionError)
    other = codes.error_from_reply("EMQVERSION queue speaks echomq:4.0.0, client speaks echomq:3.0.0")
    assert type(other) is ProtocolVersionError
    assert f"queue speaks {SHARDED}" == codes._SHARDED


async def test_a_lease_of_a_shard_still_finishes_through_the_sharded_queue(
        conn: Any, qname: str) -> None:
    q = AsyncShardedQueue(conn, qname, shards=3)
    await q.enqueue(generate("JOB"), b"x")
    (lease,) = await q.claim(1, lease_ms=60_000)
    assert isinstance(lease, Lease) and lease.queue != qname
    assert (await q.complete(lease)).value == "completed"
