"""The model-based test on a sharded queue: every transition of ``QueueMachine`` runs through
``ShardedQueue`` (3 shards, on the local cluster one per primary), checked against one
reference model per shard.

The sharded queue's own rules are modelled here: a job's shard is its lane's (else its
id's); ``claim`` asks the shards in turn from a start that moves by one each call, each
for what is still missing; reap, promote and trim act on every shard; the dead-job
bulk calls spend their limit across the shards in index order. After every step each
shard's keyspace is compared with its model (the single-queue invariant, shard by shard),
and the logical stats with their sum.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter
from typing import Any

import hypothesis.strategies as st
from hypothesis.stateful import invariant

from echomq import Lease, QueueOptions, ShardedQueue, Verdict
from echomq import generate as mint
from tests.echomq import model_machine
from tests.echomq.model_machine import LONG, MAX_ATTEMPTS, QueueMachine
from tests.echomq.model_ref import Job, Ref

SHARDS = 3


class ShardedRef:
    """One ``Ref`` per shard behind the interface the machine uses."""

    def __init__(self, refs: list[Ref], route: Any) -> None:
        self.refs, self.route = refs, route
        self.seen: Counter[str] = Counter()
        for r in refs:
            r.seen = self.seen
        self.home: dict[str, int] = {}

    @property
    def jobs(self) -> dict[str, Job]:
        return {k: v for r in self.refs for k, v in r.jobs.items()}

    @property
    def gone(self) -> set[str]:
        return set().union(*(r.gone for r in self.refs))

    def of(self, jid: str) -> Ref:
        return self.refs[self.home[jid]] if jid in self.home else Ref(max_attempts=MAX_ATTEMPTS)

    def ids(self, state: str) -> list[str]:
        return sorted(i for r in self.refs for i in r.ids(state))

    def members(self, zset: str) -> list[str]:
        return sorted(i for r in self.refs for i in r.members(zset))

    def admit(self, jid: str, payload: bytes, lane: str | None = None, serial: bool = False,
              max_attempts: int | None = None, delayed: bool = False, prio: int = 0,
              timeout: int | None = None) -> bool:
        self.home.setdefault(jid, self.route(jid, lane))
        return self.of(jid).admit(jid, payload, lane, serial, max_attempts, delayed=delayed,
                                  prio=prio, timeout=timeout)

    def live(self, jid: str, attempt: int) -> bool:
        return self.of(jid).live(jid, attempt)

    def holds(self, jid: str, attempt: int) -> bool:
        return self.of(jid).holds(jid, attempt)

    def complete(self, jid: str, attempt: int, keep: bool, at: tuple[int, int],
                 result: bytes = b"") -> Any:
        return self.of(jid).complete(jid, attempt, keep, at, result)

    def cancel(self, ids: list[str], at: tuple[int, int]) -> list[Any]:
        return [self.of(i).cancel([i], at)[0] for i in ids]

    def progress(self, jid: str, attempt: int, report: bytes) -> Any:
        return self.of(jid).progress(jid, attempt, report)

    def retry(self, jid: str, attempt: int, fail: bool, delay: bool, at: tuple[int, int], *,
              give_up: bool = False) -> Any:
        return self.of(jid).retry(jid, attempt, fail, delay, at, give_up=give_up)

    def reap(self, at: tuple[int, int]) -> tuple[int, int, int]:
        got = [r.reap(at) for r in self.refs]
        return (sum(g[0] for g in got), sum(g[1] for g in got), sum(g[2] for g in got))

    def promote(self) -> int:
        return sum(r.promote() for r in self.refs)

    def set_deadline(self, jid: str, exp: int, passed: bool) -> None:
        self.of(jid).set_deadline(jid, exp, passed)

    @property
    def lapsed(self) -> list[str]:
        return [i for r in self.refs for i in r.lapsed]

    def expire(self, batch: int, at: tuple[int, int]) -> tuple[int, int]:
        got = [r.expire(batch, at) for r in self.refs]  # each shard's reaper, one step each
        return sum(g[0] for g in got), sum(g[1] for g in got)

    def requeue_dead(self, limit: int) -> int:
        acted = 0
        for r in self.refs:
            acted += r.requeue_dead(limit - acted)
        return acted

    def purge(self, state: str, limit: int) -> int:
        acted = 0
        for r in self.refs:
            acted += r.purge(state, limit - acted)
        return acted


class ShardedMachine(QueueMachine):
    """``QueueMachine`` on a 3-shard queue; set ``url`` and ``cluster`` as for it."""

    def __init__(self) -> None:
        super().__init__()
        opts = dict(max_attempts=MAX_ATTEMPTS, keep_done_ms=LONG, keep_dead_ms=LONG)
        self.sq = ShardedQueue(self.conn, self.name, shards=SHARDS, options=QueueOptions(**opts))
        self.q: Any = self.sq
        self.q_drop: Any = ShardedQueue(self.conn, self.name, shards=SHARDS,
                                        options=QueueOptions(**(opts | {"keep_done_ms": 0})))
        self.q_short: Any = ShardedQueue(
            self.conn, self.name, shards=SHARDS,
            options=QueueOptions(**(opts | {"keep_done_ms": 1, "keep_dead_ms": 1,
                                            "keep_expired_ms": 1})))
        self.ref: Any = ShardedRef([Ref(max_attempts=MAX_ATTEMPTS) for _ in range(SHARDS)],
                                   self.sq.layout.index)
        self.turn = itertools.count()
        # A job's shard follows from its (random) id: mint ids whose shards cycle 0, 1, 2, ...
        # so that a replayed example puts every job in the same shard (hypothesis requires
        # the same draws to meet the same state).
        self._cycle = itertools.count()
        model_machine.generate = self.generate  # type: ignore[assignment]

    def generate(self, kind: str) -> str:
        want = next(self._cycle) % SHARDS
        while True:
            jid = mint(kind)
            if self.sq.layout.index(jid) == want:
                return jid

    def teardown(self) -> None:
        model_machine.generate = mint
        QueueMachine.reached.update(self.ref.seen)
        for i, shard in enumerate(self.sq.shards):
            ref = self.ref.refs[i]
            keys = [shard.keys[k] for k in ("pending", "active", "delayed", "done", "dead",
                                             "lanes", "meta", "inflight", "maint", "rate",
                                             "lane_rate", "lane_seen", "expired", "expiring")]
            keys += [shard.job_key(j) for j in [*ref.jobs, *ref.gone]]
            for key in keys:
                self.raw.delete(key)
        self.raw.delete(f"emq:{{{self.name}}}:shards")
        for queue in self.marks:
            self.raw.delete(f"emq:{{{queue}}}:sched:model")
        self.conn.close()
        self.raw.close()

    def now(self) -> int:
        if self.cluster:
            node = self.raw.get_node_from_key(self.sq.shards[0].keys["meta"])
            sec, usec = self.raw.time(target_nodes=node)
        else:
            sec, usec = self.raw.time()
        return int(sec) * 1000 + int(usec) // 1000

    def queue_of(self, jid: str) -> Any:
        return self.sq.shards[self._shard(jid)]

    def _shard(self, jid: str) -> int:
        return self.ref.home[jid]

    def _delayed(self, jid: str, delay: int, t0: int, t1: int) -> None:
        saved = self.q
        self.q = self.sq.shards[self._shard(jid)]
        try:
            super()._delayed(jid, delay, t0, t1)
        finally:
            self.q = saved

    # ------------------------------------------------------ the sharded rules
    def _claim(self, n: int, lease_ms: int, window: int | None = None) -> list[Lease]:
        start = next(self.turn) % SHARDS
        expect: list[str] = []
        for j in range(SHARDS):
            if len(expect) >= n:
                break
            ref = self.ref.refs[(start + j) % SHARDS]
            rest = n - len(expect)
            expect += ref.claim(ref.pending_order()[:window or 2 * rest + 64], rest)
        t0 = self.now()
        got = self.q.claim(n, lease_ms=lease_ms, window=window)
        t1 = self.now()
        assert [x.id for x in got] == expect
        self._adopt(got, lease_ms, t0, t1)
        return got

    def _claim_exactly(self, jid: str, lease_ms: int) -> list[Lease]:
        i = self._shard(jid)
        ref, shard = self.ref.refs[i], self.sq.shards[i]
        expect = ref.claim([jid], 1)
        t0 = self.now()
        _, got, peeked = shard.settle([], count=1, lease_ms=lease_ms, candidates=[jid.encode()],
                                      window=1)
        t1 = self.now()
        assert [x.id for x in got] == expect
        assert [p.decode() for p in peeked] == ref.pending_order()[:1]
        self._adopt(got, lease_ms, t0, t1)
        return got

    def _refused(self, lease: Lease, call: str) -> None:
        if lease.queue == self.name:  # a forged lease names its job's shard
            lease = dataclasses.replace(lease, queue=self.sq.shards[self._shard(lease.id)].name)
        super()._refused(lease, call)

    # The ops below replace the machine's own of the same name (its registry dispatches by
    # name, with the parameters drawn as it declares them).
    def enqueue_many(self, data: st.DataObject, new: int, lane: str | None) -> None:
        """As on one queue, with known ids resent with any lane: one job per id across the
        shards whatever its lane (decision 0040; before, another lane's shard admitted it)."""
        fresh = [self.generate("JOB") for _ in range(new)]
        known = sorted(self.ref.jobs)
        again = data.draw(st.lists(st.sampled_from(known), max_size=2) if known else st.just([]))
        items = data.draw(st.permutations([*fresh, fresh[0], *again]))
        wrong = self.generate("ORD")
        items.insert(data.draw(st.integers(0, len(items))), wrong)
        self.refused.add(wrong)
        self.ref.seen["enqueue_many" if lane is None else "admit_many"] += 1
        if lane is None:
            got = self.q.enqueue_many([(i, i.encode()) for i in items])
        else:
            got = self.q.admit_many([(i, i.encode(), lane) for i in items], serial=lane == "s")
        expect = [Verdict.KIND if i == wrong else Verdict.ENQUEUED
                  if self.ref.admit(i, i.encode(), lane, lane == "s") else Verdict.DUPLICATE
                  for i in items]
        assert got == expect

    def enqueue_duplicate(self, data: st.DataObject) -> None:
        jid = data.draw(st.sampled_from(sorted(self.ref.jobs)))
        lane = self.ref.jobs[jid].lane
        if lane is None:
            assert self.q.enqueue(jid, b"other") is Verdict.DUPLICATE
        assert self.q.admit(jid, b"other", lane=lane, delay_ms=LONG) is Verdict.DUPLICATE
        other = data.draw(st.sampled_from([None, "g", "f", "s", "elsewhere"]))
        self.ref.seen["duplicate with another lane"] += other != lane
        assert self.q.admit(jid, b"other", lane=other) is Verdict.DUPLICATE  # decision 0040

    def settle(self, data: st.DataObject, count: int, short: bool, window: int) -> None:
        """A shard consumer's drain flush (ShardedConsumer runs one per shard)."""
        self._on_shard(data, ShardedMachine._flushes, data, count, short, window)

    def _flushes(self, data: st.DataObject, count: int, short: bool, window: int) -> None:
        """One flush, and half the time the next one on the same shard, as a consumer's
        drain runs them: the second finishes what the first claimed. A lone flush on a
        shard whose leases had all gone stale left "settle completed" unreached for five
        rounds of one CI run."""
        QueueMachine.settle(self, data, count, short, window)
        if self.leases and data.draw(st.booleans(), label="next flush"):
            QueueMachine.settle(self, data, count, short, window)

    def foreign_version(self, data: st.DataObject, call: str) -> None:
        """Another major version recorded itself in one shard's meta: that shard refuses."""
        self._on_shard(data, QueueMachine.foreign_version, data, call)

    def schedule_ticks(self, data: st.DataObject, back: int, ahead: int, behind: int) -> None:
        """Not on a sharded queue: a schedule admits into one single-slot queue (its ticks'
        ids would route to other shards), so the single-queue machines model it."""

    def _on_shard(self, data: st.DataObject, step: Any, *args: Any) -> None:
        """Run a step of the single-queue machine on one shard and its model."""
        # Mostly a shard where a lease still holds its job, so its steps finish attempts (a
        # settle completes only the leases of its shard; "settle completed" was missed for
        # five rounds when stale leases drew the shard), else one with any lease, else any.
        held = sorted({i for i, s in enumerate(self.sq.shards) for x in self.leases
                       if x.queue == s.name and self.ref.refs[i].live(x.id, x.attempt)}) or sorted(
            {i for i, s in enumerate(self.sq.shards) for x in self.leases if x.queue == s.name})
        pick = st.sampled_from(held) if held and data.draw(st.booleans()) else st.integers(0, SHARDS - 1)
        shard = data.draw(pick, label="shard")
        saved, saved_ref = self.q, self.ref
        mine = [x for x in self.leases if x.queue == self.sq.shards[shard].name]
        self.q, self.ref = self.sq.shards[shard], self.ref.refs[shard]
        kept, self.leases = self.leases, mine
        try:
            step(self, *args)
        finally:
            new = [x for x in self.leases if x not in mine]
            self.q, self.ref = saved, saved_ref
            self.leases = (kept + new)[-30:]

    def trim(self, expire: bool) -> None:
        """Retention on every shard: each purges up to a batch of done and of dead rows."""
        assert self.q.trim() == 0
        self.ref.seen["retention kept young rows"] += any(
            j.state in ("done", "dead") for j in self.ref.jobs.values())
        if not expire:
            return
        times = [j.at[1] for j in self.ref.jobs.values()
                 if j.state in ("done", "dead", "cancelled", "expired")]
        if times:
            self.wait_past(max(times) + 1)
        batch = self.q_short.options.reap_batch
        expect = sum(r.purge(s, batch) for r in self.ref.refs for s in ("done", "dead", "expired"))
        assert self.q_short.trim() == expect

    @invariant()
    def server_matches_model(self) -> None:
        saved, saved_ref = self.q, self.ref
        try:
            for shard, ref in zip(self.sq.shards, saved_ref.refs, strict=True):
                self.q, self.ref = shard, ref
                QueueMachine.server_matches_model(self)
        finally:
            self.q, self.ref = saved, saved_ref
        stats = self.sq.stats()
        assert (stats.pending, stats.active, stats.delayed, stats.done, stats.dead,
                stats.expired) == tuple(len(self.ref.members(s)) for s in
                                        ("pending", "active", "delayed", "done", "dead", "expired"))
