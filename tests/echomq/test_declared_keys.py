"""Every key a script touches is in its KEYS (the project's rule; the server does not check it).

Valkey 7+ refuses a script's cross-slot access on a cluster, but not access to a key
missing from KEYS (checked on 8.1: a script may read any key of its slot). So the rule is
enforced here: each script runs as a *checked twin* whose every ``redis.call`` first
checks that its key is one of KEYS, through the real queue API on a real server, until
every script of the bundle has run. The shape check in each script (``EMQKEYS``) keeps
the job keys in KEYS the ones its ARGV names.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from functools import cache
from typing import Any

import pytest
import redis

from echomq import AsyncConnector, AsyncQueue, QueueOptions, ServerError, generate
from echomq.client.info import queue_info
from echomq.client.registry import Registration
from echomq.protocol import Call, QueueKeys, heartbeat, trace_attach
from echomq.protocol.flows import FlowSpec, flow_hold, member
from echomq.protocol.gate import RateLimit
from echomq.protocol.reservations import decode_reservation, reserve
from echomq.protocol.resharding import import_row, rows_exist, unload_row
from echomq.protocol.schedules import Schedule
from echomq.protocol.scripts import Script, bundle, parse
from echomq.protocol.search import SearchQuery

_PRELUDE = """local __declared, __prefix = {}, nil
for _, k in ipairs(KEYS) do
  __declared[k] = true
  __prefix = __prefix or string.match(k, '^(emq:{[^}]*}:)finished$')
end
local __settle = {waiting = true, pending = true, delayed = true, dead = true, flows = true, wake = true}
local function __derived(key)
  -- the one exception, the same-slot settle of include/flows.lua (docs/protocol.md,
  -- "Same-slot settle"): a script that includes flows and declares emq:{q}:finished may
  -- touch emq:{q}: + waiting, pending, delayed, dead, flows, the channel wake, and the row of a
  -- job that a row it may touch names as its parent in q ('<id>:<q>')
  if not __FLOWS or not __prefix or string.sub(key, 1, #__prefix) ~= __prefix then return false end
  local rest = string.sub(key, #__prefix + 1)
  if __settle[rest] then return true end
  local pid = string.match(rest, '^job:(JOB%w+)$')
  if not pid then return false end
  local named = pid .. ':' .. string.sub(__prefix, 6, -3)
  for k in pairs(__declared) do
    if string.match(k, '^emq:{[^}]*}:job:') and redis.call('HGET', k, 'parent') == named then
      return true
    end
  end
  return false
end
local function __checked(cmd, key, ...)
  if key == nil and string.upper(cmd) == 'TIME' then return redis.call(cmd) end
  if not __declared[key] then
    if not __derived(key) then
      error('EMQUNDECLARED ' .. cmd .. ' on ' .. tostring(key) .. ', not in KEYS')
    end
    __declared[key] = true
  end
  return redis.call(cmd, key, ...)
end
"""
_FLOWS = "local function flow_told("
"""The same-slot settle (include/flows.lua): the only code allowed keys it derives."""


_REDIS_CALL = re.compile(r"\bredis\.call\b")


@cache
def _twin(script: Script) -> Script:
    """``script`` with every ``redis.call`` checked against KEYS (same name and contract)."""
    head, body = script.source.split("\n", 1)
    assert "redis.call(" in body, script.name
    flows = "true" if _FLOWS in body else "false"
    prelude = f"local __FLOWS = {flows}\n{_PRELUDE}"
    # Every use of redis.call, a local alias too (claim and complete_batch keep it in a local
    # named ``call``, for speed): a replace of ``redis.call(`` alone left their calls unchecked.
    source = f"{head}\n{prelude}{_REDIS_CALL.sub('__checked', body)}"
    assert "redis.call" not in source.split(_PRELUDE, 1)[1], script.name
    return dataclasses.replace(script, source=source, sha=hashlib.sha1(source.encode()).hexdigest())


class Checked:
    """A connector that runs the checked twin of every script it is given."""

    def __init__(self, inner: AsyncConnector) -> None:
        self.inner = inner
        self.ran: set[str] = set()

    def _call(self, call: Call) -> Call:
        self.ran.add(call.script.name)
        return Call(_twin(call.script), call.keys, call.args)

    async def eval(self, script: Script, keys: Any, args: Any) -> Any:
        return await self.run(Call(script, keys, args))

    async def run(self, call: Call) -> Any:
        twin = self._call(call)
        return await self.inner.eval(twin.script, twin.keys, twin.args)

    async def pipeline(self, calls: Any, **kw: Any) -> list[Any]:
        return await self.inner.pipeline([self._call(c) for c in calls], **kw)

    async def flush(self, calls: Any, reads: Any = ()) -> list[Any]:
        reads = [self._call(r) if isinstance(r, Call) else r for r in reads]
        return await self.inner.flush([self._call(c) for c in calls], reads)

    async def pipeline_wait(self, calls: Any, **kw: Any) -> Any:
        return await self.inner.pipeline_wait([self._call(c) for c in calls], **kw)

    async def load(self, script: Script) -> None:
        await self.inner.load(_twin(script))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def test_the_checked_twin_catches_an_undeclared_key(conn: AsyncConnector, qname: str) -> None:
    sneaky = parse("sneaky", "#!lua\n-- name: sneaky\n-- summary: x\n-- KEYS[1] a: a key\n"
                             "-- RETURNS: x\n-- ERRORS: none\n"
                             "return redis.call('GET', string.sub(KEYS[1], 1, -2) .. 'other')\n")
    key = f"emq:{{{qname}}}:a"
    assert await conn.eval(sneaky, [key], []) is None  # the server allows it (same slot) ...
    with pytest.raises(ServerError, match="EMQUNDECLARED"):
        await conn.eval(_twin(sneaky), [key], [])  # ... the twin does not


async def test_the_same_slot_settle_may_touch_only_the_keys_its_rule_derives(
        conn: AsyncConnector, qname: str, raw: redis.Redis) -> None:
    """The twin's one exception is the rule of include/flows.lua, no wider: from the declared
    ``emq:{q}:finished`` the same queue's waiting, pending, delayed, dead and wake, and the
    row a touched row names as its parent in q; only in a script that includes flows."""
    k = QueueKeys.of(qname)
    child, parent, stranger = generate("JOB"), generate("JOB"), generate("JOB")
    raw.hset(k.job(child), "parent", f"{parent}:{qname}")
    raw.hset(k.job(parent), "parent", f"{stranger}:{qname}-other")

    def probe(target: str, flows: bool) -> Script:
        body = "local function flow_told() end\n" if flows else ""
        return parse("probe", "#!lua\n-- name: probe\n-- summary: x\n-- KEYS[1] job: a row\n"
                              "-- KEYS[2] finished: the finished key\n-- RETURNS: x\n"
                              f"-- ERRORS: none\n{body}"
                              f"return redis.call('EXISTS', '{target}')\n")

    keys = [k.job(child), k.finished]
    for target in (k.waiting, k.pending, k.delayed, k.dead, k.wake, k.job(parent)):
        assert await conn.eval(_twin(probe(target, True)), keys, []) in (0, 1), target
    for target in (k.lanes, k.meta, k.job(stranger), QueueKeys.of(qname + "-other").waiting,
                   k.job(generate("JOB"))):
        with pytest.raises(ServerError, match="EMQUNDECLARED"):
            await conn.eval(_twin(probe(target, True)), keys, [])
    with pytest.raises(ServerError, match="EMQUNDECLARED"):  # not a script that settles
        await conn.eval(_twin(probe(k.waiting, False)), keys, [])


async def test_every_script_touches_only_its_declared_keys(conn: AsyncConnector, qname: str,
                                                           raw: redis.Redis) -> None:
    c = Checked(conn)
    q = AsyncQueue(c, qname, options=QueueOptions(keep_done_ms=1, keep_dead_ms=1))  # type: ignore[arg-type]
    one = AsyncQueue(c, qname, options=QueueOptions(max_attempts=1))  # type: ignore[arg-type]
    await q.fence()
    await q.enqueue_many([(generate("JOB"), b"a") for _ in range(6)])
    traced = generate("JOB")
    await q.enqueue(traced, b"b")
    await c.run(trace_attach(q.k, traced, "00-" + "1" * 32 + "-" + "2" * 16 + "-01"))
    await q.admit(generate("JOB"), b"c", lane="s", serial=True)
    await q.admit(generate("JOB"), b"d", delay_ms=1)
    await q.admit_many([(generate("JOB"), b"e", "f")])
    a, b, c1, d, e, f, g = await q.claim(7, lease_ms=60_000)
    await q.pause()
    await q.resume()
    await q.set_limits(rate=RateLimit(100, 1000), lane_rate=RateLimit(2, 1000))
    await q.heartbeat(a, lease_ms=60_000)
    await q.report_progress(a, b"half")
    await q.heartbeat_many([b, c1], lease_ms=60_000)  # heartbeat_batch
    await q.complete(a, b"r")
    await q.complete_many([b])
    await q.settle([(c1, b"")], count=1, lease_ms=60_000, candidates=[], window=3)
    await q.retry(d, delay_ms=5, error="boom")
    await q.defer(e, delay_ms=0)
    await one.retry(f, delay_ms=0, error="dead")
    await one.retry(g, delay_ms=0, error="dead")
    (dead, *_) = [v.id for v in await q.browse("dead")]
    await q.requeue([dead])
    await q.requeue_dead(limit=1)
    while not await q.promote() and (await q.stats()).delayed:
        pass
    await q.admit(generate("JOB"), b"p", lane="f", priority=2)
    await q.claim(2, lease_ms=1)
    while (await q.stats()).active and not sum(await q.reap()):
        pass
    waiting = [v.id for v in await q.browse("pending")]
    await q.cancel(waiting[:1])
    await q.purge("done", [a.id])
    await q.purge_dead(limit=5)
    await q.trim()
    # Expiry (decision 0045): the reaper ends one job past its deadline, a claim another.
    x = AsyncQueue(c, qname + "-x")  # type: ignore[arg-type]
    for reaper in (True, False):
        t = await c.server_time_ms()
        await x.admit(generate("JOB"), b"x", expires_ms=1)
        while await c.server_time_ms() <= t + 2:
            pass
        assert await x.expire() == (1, 0) if reaper else await x.claim(1, lease_ms=60_000) == []
    assert (await x.stats()).expired == 2
    await q.job(a.id)
    await q.pending_size()
    await q.stats()
    await q.admit(generate("JOB"), b"t", dedupe_ms=60_000, dedupe_key="dk")
    await q.admit(generate("JOB"), b"u", dedupe_ms=60_000, dedupe_key="dk", dedupe_mode="debounce")
    assert (await q.search(SearchQuery(states=("dead", "pending"), error_type="boom"), budget=2)).windows
    every = Schedule(name="dk", queue=qname, every_ms=1000, lane="sl")
    tick = every.latest(await c.server_time_ms())
    await c.run(every.call([], floor=tick - 2000))
    await c.run(every.call([tick - 1000, tick]))
    reg = Registration(c, [qname], name="w1")  # type: ignore[arg-type]
    await reg.beat()
    await queue_info(c, qname)  # type: ignore[arg-type]
    await reg.remove()
    # The hand-off path (decision 0018): park on an empty queue, then an admission leases to it.
    h = AsyncQueue(c, qname + "-h")  # type: ignore[arg-type]
    assert await h.park("t1", lease_ms=60_000, ttl_ms=60_000)
    await h.admit(generate("JOB"), b"h")
    assert (await h.stats()).active == 1
    assert await h.park("t1", lease_ms=60_000, ttl_ms=0)
    # The online reshard's calls (decision 0032): rows copied in, asked for, removed.
    mk = QueueKeys.of(qname + "-m")
    held, done = generate("JOB"), generate("JOB")
    row = {"state": b"pending", "attempts": b"1", "payload": b"m", "lane": b"ml", "serial": b"1"}
    assert await c.run(import_row(mk, held, "pending", 0, True, row)) == 1
    assert await c.run(import_row(mk, done, "done", 1.5e12, False, {"state": b"done"})) == 1
    assert await c.run(rows_exist(mk, [held, done, generate("JOB")])) == [1, 1, 0]
    assert await c.run(unload_row(mk, held)) == 1
    # A sharded queue's reservation (decision 0040): reserved, taken over, freed.
    rid = generate("JOB")
    first = decode_reservation(await c.run(reserve(mk, rid, "s1")))
    assert first.verdict == "reserved"
    assert decode_reservation(await c.run(reserve(mk, rid, "", owner="s1", at=first.at))).verdict \
        == "free"
    # A flow (decision 0038): children end by complete, complete_batch, retry to dead, reap
    # to dead and cancel; the relay settles and acks; the repair tombstones and drops.
    fq = AsyncQueue(c, qname + "-f", options=QueueOptions(max_attempts=1))  # type: ignore[arg-type]
    pid = generate("JOB")
    await fq.admit_flow(parent=(pid, b"p"), children=[(fq.name, generate("JOB"), b"k")
                                                      for _ in range(5)], on_child_failure="continue")
    k1, k2, k3, k4 = await fq.claim(4, lease_ms=60_000)
    await fq.complete(k1, b"r")
    await fq.complete_many([k2])
    await fq.retry(k3, delay_ms=0, error="x")
    await c.run(heartbeat(fq.k, k4, lease_ms=1))
    while not sum(await fq.reap()):
        pass
    await fq.flows.relay(fq.name)
    await fq.cancel_flow(pid)
    await fq.flows.relay(fq.name)
    await c.run(flow_hold(fq.k, generate("JOB"), b"x", member(generate("JOB"), fq.name)))
    await fq.flows.repair(fq.name, older_than_ms=0)
    # Same slot, two levels (decision 0041): a leaf's retry to dead fails its parent, whose
    # own parent (the grandparent's row, derived in-script) is settled in the same script;
    # a child in another queue still goes through the relay (flow_parent settle).
    leaf, inner, root = generate("JOB"), generate("JOB"), generate("JOB")
    side = AsyncQueue(c, qname + "-g")  # type: ignore[arg-type]
    await fq.flows.admit_tree(FlowSpec(fq.name, root, b"r", (
        FlowSpec(fq.name, inner, b"i", (FlowSpec(fq.name, leaf, b"l"),)),
        FlowSpec(side.name, generate("JOB"), b"s")), "continue"))
    (lease,) = await fq.claim(1, lease_ms=60_000)
    await fq.retry(lease, delay_ms=0, error="x")
    (far,) = await side.claim(1, lease_ms=60_000)
    await side.complete(far, b"")
    assert (await side.flows.relay(side.name)).released == 1
    assert (await fq.job(root) or {})["state"] == b"pending"
    # a same-slot child past its deadline, ended by claim: its parent settled inside claim
    eq = AsyncQueue(c, qname + "-e")  # type: ignore[arg-type]
    late, lp = generate("JOB"), generate("JOB")
    t = await c.server_time_ms()
    await eq.admit_flow(parent=(lp, b"p"), children=[(eq.name, late, b"l")],
                        on_child_failure="ignore", expires_ms=1)
    while await c.server_time_ms() <= t + 2:
        pass
    assert [x.id for x in await eq.claim(1, lease_ms=60_000)] == []  # the child expired ...
    assert [x.id for x in await eq.claim(1, lease_ms=60_000)] == [lp]  # ... and released it
    assert c.ran == set(bundle()), set(bundle()) - c.ran
