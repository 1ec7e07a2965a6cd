"""Write-last scripts (issue 11, item 2): every check precedes the first write.

* A batch of 5,000 finishes in ONE ``complete_batch`` call (past Lua's ``unpack`` limit,
  which used to fail after the batch's ``ZREM`` had run) completes every attempt.
* Calls whose KEYS do not line up with their ARGV (a job key that is not its id's, keys
  of another queue, a missing key) are refused with EMQKEYS and write nothing.
* The one runtime error a script cannot foresee (a queue key overwritten with the wrong
  type by a foreign client) is documented in docs/protocol.md; the test shows the state
  it leaves, so that statement stays true.
"""

from __future__ import annotations

import pytest
import redis

from echomq import AsyncQueue, Completion, ScriptContractError, ServerError, generate
from echomq import protocol as p
from tests.conftest import keys_of


def _dump(raw: redis.Redis, queue: str) -> dict[str, bytes]:
    return {k: raw.dump(k) for k in sorted(keys_of(raw, queue))}


async def test_one_complete_batch_call_of_5000_attempts_finishes_them_all(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    n = 5000
    await queue.enqueue_many([(generate("JOB"), b"") for _ in range(n)])
    leases = []
    while len(leases) < n:
        leases += await queue.claim(1000, lease_ms=120_000)
    call = p.complete_batch(queue.k, [(x, b"") for x in leases], keep_ms=60_000)
    reply = await queue.connector.run(call)  # one script call, no client-side slicing
    assert p.decode_completions([reply]) == [Completion.COMPLETED] * n
    assert raw.zcard(queue.keys["done"]) == n and raw.zcard(queue.keys["active"]) == 0


async def test_keys_that_do_not_line_up_with_argv_are_refused_and_write_nothing(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    a, b = generate("JOB"), generate("JOB")
    await queue.enqueue_many([(a, b"A"), (b, b"B")])
    (lease,) = await queue.claim(1, lease_ms=60_000)
    before = _dump(raw, queue.name)
    other = p.QueueKeys.of(queue.name + "-other")
    good = p.claim(queue.k, [b.encode()], count=1, lease_ms=1000)
    fixed = len(good.keys) - 1  # the claim's own keys, before the candidates' job keys
    swapped = p.Call(good.script, [*good.keys[:fixed], queue.k.job(a)], good.args)  # b's id, a's row
    foreign = p.Call(good.script, [*good.keys[:4], other.inflight, *good.keys[5:]], good.args)
    short = p.Call(good.script, good.keys[:fixed], good.args)
    hb = p.heartbeat(queue.k, lease, lease_ms=1000)
    wrong_job = p.Call(hb.script, [hb.keys[0], queue.k.job(b), hb.keys[2]], hb.args)
    for bad in (swapped, wrong_job):
        with pytest.raises(ScriptContractError, match="EMQKEYS"):
            await queue.connector.run(bad)
    with pytest.raises((ScriptContractError, ServerError)):  # a cluster refuses it first
        await queue.connector.run(foreign)  # (CROSSSLOT); one server answers EMQKEYS
    with pytest.raises(ScriptContractError):  # caught on the client, by the contract
        await queue.connector.run(short)
    reap = p.reap(queue.k, [a.encode()], max_attempts=5)
    with pytest.raises(ScriptContractError, match="EMQKEYS"):  # the server's own check too
        await queue.connector.eval(reap.script, reap.keys, [5, b])  # a's row, b's id
    assert _dump(raw, queue.name) == before


async def test_a_foreign_wrong_typed_key_is_the_error_that_can_follow_a_write(
        queue: AsyncQueue, raw: redis.Redis) -> None:
    """What docs/protocol.md says Valkey leaves after a runtime error (no rollback)."""
    a = generate("JOB")
    await queue.enqueue(a, b"A")
    (lease,) = await queue.claim(1, lease_ms=60_000)
    raw.set(queue.keys["done"], "not a sorted set")  # a foreign client broke the done set
    with pytest.raises(ServerError, match="WRONGTYPE"):
        await queue.complete(lease)
    # The writes before the failing ZADD stayed: the lease is gone and the row says done,
    # but the job is in no set. Nothing in EchoMQ writes such a key (protect emq:* by ACL).
    assert raw.zscore(queue.keys["active"], a) is None
    assert raw.hget(queue.job_key(a), "state") == b"done"
    assert raw.type(queue.keys["done"]) == b"string"
