"""One blocking connector shared by 32 threads: every verdict exact (issue 11, item 4).

The threads admit overlapping ids (``enqueue_many`` and ``enqueue``), then claim and
complete them, each thread also trying to complete the leases of others. Ground truth
is the server's own rows: every id was ENQUEUED exactly once, by the thread whose payload
the row holds, and DUPLICATE for every other thread that sent it; every job was leased
exactly once with that payload; every lease COMPLETED exactly once. Runs on the single
server and on the cluster.
"""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

import redis

from echomq import ClusterConnector, Completion, Connector, Lease, Queue, Verdict, generate
from tests.echomq.invariants import assert_consistent

THREADS = 32
IDS = 1200
SHARE = 150  # ids per thread: thread t sends ids[t*37 : t*37 + 150], so neighbours overlap


def _run(threads: int, work: Callable[[int], None]) -> None:
    errors: list[BaseException] = []
    start = threading.Barrier(threads)

    def body(t: int) -> None:
        try:
            start.wait()
            work(t)
        except BaseException as exc:  # reported below, in the test thread
            errors.append(exc)

    pool = [threading.Thread(target=body, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join(120)
    assert not any(th.is_alive() for th in pool), "a thread hung"
    assert not errors, errors[:3]


def test_32_threads_share_one_blocking_connector_and_every_verdict_is_exact(
        sync_conn: Connector | ClusterConnector, qname: str, raw: redis.Redis) -> None:
    q = Queue(sync_conn, qname)
    ids = sorted(generate("JOB") for _ in range(IDS))
    mine: dict[int, list[str]] = {t: [ids[(t * 37 + i) % IDS] for i in range(SHARE)]
                                  for t in range(THREADS)}
    verdicts: dict[int, dict[str, Verdict]] = {}

    def admit(t: int) -> None:
        # half through enqueue_many (in pieces, so calls interleave), half one by one
        got: dict[str, Verdict] = {}
        half = mine[t][: SHARE // 2]
        for i in range(0, len(half), 25):
            piece = half[i : i + 25]
            for jid, v in zip(piece, q.enqueue_many([(j, f"{t}:{j}".encode()) for j in piece]),
                              strict=True):
                assert isinstance(v, Verdict), v
                got[jid] = v
        for jid in mine[t][SHARE // 2 :]:
            got[jid] = q.enqueue(jid, f"{t}:{jid}".encode())
        verdicts[t] = got

    _run(THREADS, admit)
    sent = Counter(j for t in range(THREADS) for j in mine[t])
    assert set(sent) == set(ids)
    for jid in ids:
        payload = raw.hget(q.job_key(jid), "payload")
        assert payload is not None, jid
        owner = int(payload.split(b":")[0])
        said = {t: verdicts[t][jid] for t in range(THREADS) if jid in verdicts[t]}
        # the thread whose payload the row holds is the one told ENQUEUED; all others DUPLICATE
        assert said[owner] is Verdict.ENQUEUED, (jid, said)
        assert Counter(said.values()) == {Verdict.ENQUEUED: 1, Verdict.DUPLICATE: sent[jid] - 1}
    assert q.stats().pending == IDS

    leased: dict[int, list[Lease]] = defaultdict(list)

    def claim(t: int) -> None:
        while True:
            got = q.claim(7, lease_ms=120_000)
            if not got:
                return
            leased[t] += got

    _run(THREADS, claim)
    every = [x for t in leased for x in leased[t]]
    assert sorted(x.id for x in every) == ids  # each job leased exactly once
    for x in every:
        assert x.attempt == 1 and x.payload == raw.hget(q.job_key(x.id), "payload")

    outcome: dict[int, list[tuple[str, Completion]]] = defaultdict(list)
    order = sorted(leased)

    def complete(t: int) -> None:
        # its own leases and, overlapping, the next thread's: two finishes race per lease
        theirs = leased[order[(order.index(t) + 1) % len(order)]] if t in leased else []
        own = leased.get(t, [])
        for lease_pair in (own[:3], theirs[:3]):  # batched finishes (complete_many)
            if lease_pair:
                done = q.complete_many(lease_pair)
                outcome[t] += [(x.id, v) for x, v in zip(lease_pair, done, strict=True)]
        for x in [*own[3:], *theirs[3:]]:
            outcome[t].append((x.id, q.complete(x, b"r")))

    _run(THREADS, complete)
    finished: dict[str, list[Completion]] = defaultdict(list)
    for t in outcome:
        for jid, v in outcome[t]:
            finished[jid].append(v)
    assert sorted(finished) == ids
    for jid, vs in finished.items():
        assert vs.count(Completion.COMPLETED) == 1, (jid, vs)  # exactly one finish won
        assert raw.hget(q.job_key(jid), "state") == b"done"
    assert q.stats().done == IDS
    assert set(assert_consistent(raw, qname).values()) == {"done"}


def test_threads_share_the_bulk_wire_without_crossing_replies(
        sync_conn: Connector | ClusterConnector, qname: str) -> None:
    """Bulk calls from many threads at once: each thread's replies are its own (a crossed
    reply would show another thread's verdict count or ids)."""
    q = Queue(sync_conn, qname)
    results: dict[int, Any] = {}

    def work(t: int) -> None:
        fresh = [generate("JOB") for _ in range(200 + t)]
        first = q.enqueue_many([(j, b"") for j in fresh])
        again = q.enqueue_many([(j, b"") for j in fresh])
        results[t] = (first.count(Verdict.ENQUEUED), again.count(Verdict.DUPLICATE), len(fresh))

    _run(THREADS, work)
    for t, (enq, dup, n) in results.items():
        assert enq == dup == n, (t, enq, dup, n)
