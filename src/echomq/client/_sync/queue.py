# Generated from echomq/client/_async/queue.py by scripts/unasync_gen.py. Do not edit.
"""A queue: admission, the claim plane and inspection, each one Lua script per transition.

Scripts that act on jobs they cannot name in advance (claim, promote, reap, browse,
requeue, purge) follow one pattern so that every key they touch is declared: the
client *peeks* candidate ids with a read (``ZRANGE``), then calls the script with the
candidates' job keys in KEYS; the script re-checks each candidate on the server and
skips those that moved meanwhile. See docs/decisions/0002-peek-then-act.md.

Calls are built and replies decoded by :mod:`echomq.protocol`; every argument is
checked against its documented range there before any I/O. Every script checks the
queue's protocol version itself (docs/decisions/0011), so every method raises
:class:`~echomq.core.errors.ProtocolVersionError` on a queue of another major version.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from echomq import protocol as p
from echomq.client._sync.admission import Admission, AdmitItem
from echomq.client._sync.flows import Child, FlowNode, Flows
from echomq.client._sync.results import read_progress, wait_result
from echomq.client._sync.seam import Reply, ScriptConnector, WakeSubscription
from echomq.client._sync.search import SearchPage, search
from echomq.client._sync.upkeep import Upkeep
from echomq.core.bounds import MAX_PROGRESS, MAX_RESULTS, check_bytes
from echomq.core.errors import EchoMQError, InvalidArgument
from echomq.core.model import (
    PROTOCOL,
    CancelOutcome,
    Completion,
    JobView,
    Lease,
    ProgressOutcome,
    QueueOptions,
    RetryOutcome,
    Stats,
    Verdict,
)
from echomq.protocol import Bulk, Call
from echomq.protocol import handoff as h
from echomq.protocol.decoders import text
from echomq.protocol.flows import PLAIN, StepOptions
from echomq.protocol.gate import Claimed, Gate, RateLimit, check_lane_rate, decode_gate
from echomq.protocol.search import SearchQuery

__all__ = ["Queue"]

_FINISH_BATCH = 256
_CLAIM_SPARE = 32
"""Candidates a settle's claim carries beyond ``count`` (at least; ``count`` more when
``count`` is larger): room to skip ids another consumer took, jobs of busy serial lanes and
jobs the gate holds, without sending the whole peeked window (each candidate is a key and
an id the server parses and checks; bench/transition_cpu.py)."""


class Queue:
    """One queue named ``name`` on a connector. Cheap to create; holds no connection.

    The queue admits and leases; its :attr:`upkeep` (:class:`Upkeep`) promotes,
    reaps, trims and answers operators, and the queue's methods of those names hand over
    to it.
    """

    def __init__(
        self, connector: ScriptConnector, name: str, *,
        options: QueueOptions | None = None,
    ) -> None:
        self.k = p.QueueKeys.of(name)
        if options is not None and not isinstance(options, QueueOptions):
            raise InvalidArgument(f"options must be QueueOptions, not {type(options).__name__}")
        self.connector: ScriptConnector = connector
        self.name = name
        self.options = options or QueueOptions()
        self.keys = self.k.as_dict()
        self._job_prefix = self.k.job_prefix
        self.upkeep = Upkeep(connector, self.k, self.options)
        self.admission = Admission(connector, self.k, self.options, name)
        self.flows = Flows(connector)

    # ----------------------------------------------------------------- helpers
    def job_key(self, job_id: str) -> str:
        """``emq:{q}:job:<id>``; refuses a malformed id before any I/O."""
        return self.k.job(job_id)

    def _run(self, call: Call) -> Reply:
        return self.connector.run(call)

    def fence(self) -> str:
        """Record (or check) the queue's protocol version; returns the version recorded.

        Not needed before other calls (each script checks the version itself); it is the
        explicit check, e.g. at startup: ProtocolVersionError on another major version.
        """
        return text(self._run(p.fence(self.k, PROTOCOL)))

    def peek(self, state: str, count: int, *, start: int = 0) -> list[bytes]:
        """The ids of up to ``count`` jobs in ``state`` from rank ``start`` (set order): the
        candidates a peek-then-act script re-checks (docs/decisions/0002)."""
        return self.upkeep.peek(state, count, start=start)

    def wake_subscription(self) -> WakeSubscription:
        """A subscription to the queue's wake channel: each message is the id of a job
        admitted onto an empty pending set (``get_message``/``close``)."""
        return self.connector.wake_subscription(self.k.wake)

    # --------------------------------------------------------------- admission
    def admit(
        self,
        job_id: str,
        payload: bytes,
        *,
        lane: str | None = None,
        delay_ms: int = 0,
        serial: bool = False,
        max_attempts: int | None = None,
        priority: int = 0,
        timeout_ms: int | None = None,
        dedupe_ms: int | None = None,
        dedupe_key: str | None = None,
        dedupe_mode: str | None = None,
        expires_ms: int | None = None,
    ) -> Verdict:
        """Admit one job: ENQUEUED, DUPLICATE, REPLACED or KIND (the one admission verb); the
        options (dedupe windows too) and the refusals are :meth:`Admission.admit`'s."""
        return self.admission.admit(job_id, payload, lane=lane, delay_ms=delay_ms,
                                          serial=serial, max_attempts=max_attempts,
                                          priority=priority, timeout_ms=timeout_ms,
                                          dedupe_ms=dedupe_ms, dedupe_key=dedupe_key,
                                          dedupe_mode=dedupe_mode, expires_ms=expires_ms)

    def admit_flow(self, *, parent: tuple[str, bytes], children: Sequence[Child],
                         on_child_failure: str = "fail", expires_ms: int | None = None,
                         options: StepOptions = PLAIN) -> bool:
        """Admit ``parent`` = (id, payload) here, waiting for ``children`` = (queue, id,
        payload) in any queues, each with its own :class:`StepOptions` as a fourth element if
        it has any; released (pending) once every child ended, with ``options`` as its own.
        ``on_child_failure``: 'fail' (the parent dies), 'continue' (failures recorded) or
        'ignore'. True admitted, False a retry of this flow (decision 0038; :class:`Flows`)."""
        return self.flows.admit(self.name, parent, children, on_child_failure=on_child_failure,
                                      expires_ms=expires_ms, options=options)

    def children(self, parent_id: str) -> list[FlowNode]:
        """The children of a flow's parent here, each with its state, outcome and result."""
        return self.flows.children(self.name, parent_id)

    def cancel_flow(self, parent_id: str) -> bool:
        """Cancel the flow of ``parent_id`` here and its children (:meth:`Flows.cancel`)."""
        return self.flows.cancel(self.name, parent_id)

    def enqueue(self, job_id: str, payload: bytes) -> Verdict:
        """The protocol's name for :meth:`admit` without options (docs/protocol.md,
        "Admission"): the same call, the same verdicts."""
        return self.admission.admit(job_id, payload)

    def admit_many(
        self, items: Iterable[AdmitItem], *, serial: bool = False, priority: int = 0,
        timeout_ms: int | None = None, delay_ms: int = 0, max_attempts: int | None = None,
        dedupe_ms: int | None = None, dedupe_mode: str | None = None,
        expires_ms: int | None = None,
    ) -> list[Verdict | EchoMQError]:
        """Admit many jobs, one verdict (or typed error) per item in input order
        (:meth:`Admission.admit_many`)."""
        return self.admission.admit_many(items, serial=serial, priority=priority,
                                               timeout_ms=timeout_ms, delay_ms=delay_ms,
                                               max_attempts=max_attempts, dedupe_ms=dedupe_ms,
                                               dedupe_mode=dedupe_mode,
                                               expires_ms=expires_ms)

    def enqueue_many(self, pairs: Iterable[AdmitItem]) -> list[Verdict | EchoMQError]:
        """The protocol's name for :meth:`admit_many` (docs/protocol.md, "Admission"): the
        same call, the same verdicts."""
        return self.admission.admit_many(pairs)

    # ------------------------------------------------------------- claim plane
    def claim(self, count: int = 1, *, lease_ms: int, window: int | None = None) -> Claimed:
        """Lease up to ``count`` (1..10,000) pending jobs for ``lease_ms`` (server clock).

        Peeks ``window`` candidates (default ``2*count + 64``, room to skip jobs of
        busy serial lanes; at least ``count``) and claims with one script. The claim gate
        may hold jobs back: the result says so (``paused``, ``wait_ms``).
        """
        p.check_int("count", count, 1, p.MAX_COUNT)
        p.check_int("lease_ms", lease_ms, 1, p.MAX_LEASE_MS)
        peek = 2 * count + 64 if window is None else p.check_int(
            "window", window, 1, p.MAX_WINDOW)
        ids = self.peek("pending", peek)
        if not ids:
            return Claimed([])
        flat = self._run(p.claim(self.k, ids, count=count, lease_ms=lease_ms))
        return p.decode_leases(self.name, flat)

    # -------------------------------------------------------------- claim gate
    def pause(self) -> Gate:
        """Stop claims (every consumer of the queue); admissions go on. Returns the gate."""
        return decode_gate(self._run(p.pause(self.k, True)))

    def resume(self) -> Gate:
        """Let claims go on again; parked consumers are woken. Returns the gate."""
        return decode_gate(self._run(p.pause(self.k, False)))

    def gate(self) -> Gate:
        """The queue's claim gate: paused or not, and its rate limits."""
        return decode_gate(self._run(p.pause(self.k, None)))

    def set_limits(self, *, rate: RateLimit | None = None,
                         lane_rate: RateLimit | None = None) -> Gate:
        """Rate limits for every consumer of the queue, on the server clock: at most
        ``rate.max`` leases in any ``rate.per_ms`` window, and at most ``lane_rate.max``
        per lane. None removes a limit. A held-back job stays pending, no attempt counted."""
        for name, value in (("rate", rate), ("lane_rate", lane_rate)):
            if value is not None and not isinstance(value, RateLimit):
                raise InvalidArgument(f"{name} must be a RateLimit or None, not {type(value).__name__}")
        check_lane_rate(lane_rate)
        call = p.limits(self.k, None if rate is None else (rate.max, rate.per_ms),
                        None if lane_rate is None else (lane_rate.max, lane_rate.per_ms))
        return decode_gate(self._run(call))

    def _lease(self, lease: Lease) -> Lease:
        lease = p.check_lease(lease)
        if lease.queue != self.name:
            raise InvalidArgument(f"lease of queue {lease.queue!r} given to queue {self.name!r}")
        self.k.job(lease.id)
        return lease

    def heartbeat(self, lease: Lease, *, lease_ms: int) -> p.Deadline | None:
        """Extend ``lease``; returns the new deadline (server ms) or None if the lease is lost.
        The deadline's ``cancel`` is True when the job was asked to stop (``cancel``)."""
        p.check_int("lease_ms", lease_ms, 1, p.MAX_LEASE_MS)
        call = p.heartbeat(self.k, self._lease(lease), lease_ms=lease_ms)
        return p.decode_deadline(self._run(call))

    def heartbeat_many(self, leases: Sequence[Lease], *,
                             lease_ms: int) -> list[p.Deadline | None]:
        """Extend many leases in one flush; one deadline or None per lease, in order, each
        as :meth:`heartbeat` answers it.

        Sent as ``heartbeat_batch`` calls of up to ``MAX_BEATS`` (256) leases: one script
        call per consumer beat instead of one per held lease (decision 0055); one lease goes
        as a ``heartbeat`` call, the cheaper script for one. Every lease is checked before
        any I/O, so a malformed one sends nothing."""
        p.check_int("lease_ms", lease_ms, 1, p.MAX_LEASE_MS)
        name = self.name
        for x in leases:  # the lease's type and queue; its id where the builder makes its key
            if type(x) is not Lease or x.queue != name:
                self._lease(x)  # raises, naming what is wrong
        if len(leases) < 2:  # one lease: heartbeat itself, the cheaper script for one
            return [p.decode_deadline(self._run(p.heartbeat(self.k, x, lease_ms=lease_ms)))
                    for x in leases]
        calls = [p.heartbeat_batch(self.k, leases[i : i + p.MAX_BEATS], lease_ms=lease_ms)
                 for i in range(0, len(leases), p.MAX_BEATS)]
        if len(calls) == 1:  # the common beat: one call, no pipeline
            return p.decode_deadlines([self._run(calls[0])])
        return p.decode_deadlines(self.connector.pipeline(calls))

    def _result(self, result: object) -> bytes:
        return check_bytes("result", result, self.options.max_result)

    def _complete_batches(self, finished: Sequence[tuple[Lease, bytes]]) -> list[Call]:
        # One complete_batch call per _FINISH_BATCH attempts: each call stays short (the
        # server runs nothing else meanwhile).
        # Checked once per attempt, before any I/O: the lease's type and queue here, its
        # id where complete_batch builds the job's key (k.job refuses a malformed one).
        # A call also carries at most MAX_RESULTS bytes of results (the script's bound).
        name, limit, checked = self.name, self.options.max_result, []
        for x, r in finished:
            if type(x) is not Lease:
                p.check_lease(x)
            if x.queue != name:
                self._lease(x)  # raises: a lease of another queue
            checked.append((x, r if type(r) is bytes and len(r) <= limit else self._result(r)))
        calls, start, size = [], 0, 0
        for i, (_, r) in enumerate(checked):
            if i - start == _FINISH_BATCH or size + len(r) > MAX_RESULTS:
                calls.append(p.complete_batch(self.k, checked[start:i], keep_ms=self.options.keep_done_ms))
                start, size = i, 0
            size += len(r)
        if start < len(checked):
            calls.append(p.complete_batch(self.k, checked[start:], keep_ms=self.options.keep_done_ms))
        return calls

    def complete(self, lease: Lease, result: bytes = b"") -> Completion:
        """Finish an attempt (fenced). STALE if the attempt no longer holds the job."""
        call = p.complete(self.k, self._lease(lease), keep_ms=self.options.keep_done_ms,
                          result=self._result(result))
        return p.decode_completion(self._run(call))

    def complete_many(
        self, leases: Sequence[Lease], results: Sequence[bytes] | None = None
    ) -> list[Completion]:
        """Finish many attempts in one flush, each fenced on its own, with optional results.

        Sent as ``complete_batch`` calls of up to 256 attempts (one script call per batch
        instead of per attempt: about half the server's CPU); one verdict per lease, in order.
        """
        res = results if results is not None else [b""] * len(leases)
        if len(res) != len(leases):
            raise InvalidArgument(f"{len(leases)} leases but {len(res)} results")
        if not leases:
            return []
        replies = self.connector.pipeline(self._complete_batches(list(zip(leases, res, strict=True))))
        return p.decode_completions(replies)

    def settle(
        self, finished: Sequence[tuple[Lease, bytes]], *, count: int, lease_ms: int,
        candidates: Sequence[bytes], window: int,
    ) -> tuple[list[Completion], Claimed, list[bytes]]:
        """As :meth:`_settle_parking` without parking."""
        done, leases, cands, _ = self._settle_parking(
            finished, count=count, lease_ms=lease_ms, candidates=candidates, window=window)
        return done, leases, cands

    def _settle_parking(
        self, finished: Sequence[tuple[Lease, bytes]], *, count: int, lease_ms: int,
        candidates: Sequence[bytes], window: int, park: str | None = None, park_ttl_ms: int = 0,
    ) -> tuple[list[Completion], Claimed, list[bytes], bool]:
        """Complete ``finished`` attempts, claim up to ``count`` of ``candidates`` and peek
        the next ``window`` candidates, all in one flush (one round trip).

        Each completion is fenced on its own with its own verdict; the claim is the
        ``claim`` script on ids peeked by an earlier flush (the first ``count`` plus
        ``max(count, 32)`` of them), so it re-checks every candidate on the server
        (docs/decisions/0002) and skips those that moved; the peek
        runs after the claim, so its ids are the next candidates. ``count`` 0 or no
        candidates: no claim; ``window`` 0: no peek. With ``park`` (a consumer's token) the
        same flush also parks it for hand-off (``park`` script, ``park_ttl_ms``; it parks only
        if pending is empty, docs/decisions/0018), so an idle consumer parks without a round
        trip of its own. Returns (verdicts in input order, leases, next candidates, parked).
        """
        p.check_int("count", count, 0, p.MAX_COUNT)
        p.check_int("lease_ms", lease_ms, 1, p.MAX_LEASE_MS)
        p.check_int("window", window, 0, p.MAX_WINDOW)
        calls = self._complete_batches(finished)
        nb = len(calls)
        claim = bool(count and candidates)
        if claim:
            spare = max(count, _CLAIM_SPARE)
            calls.append(p.claim(self.k, candidates[: count + spare], count=count, lease_ms=lease_ms))
        if park is not None:
            calls.append(h.park(self.k, park, lease_ms=lease_ms, ttl_ms=park_ttl_ms))
        # The peek is a read after the calls (sent again if a call had to be reloaded), so
        # it sees the claim: its ids are the next candidates.
        reads = [p.peek(self.k, "pending", start=0, count=window)] if window else []
        replies = self.connector.flush(calls, reads)
        leases = p.decode_leases(self.name, replies[nb]) if claim else Claimed([])
        try:
            done = p.decode_completions(replies[:nb])
        except EchoMQError:
            # A completion was refused, the claim in the same flush was not: give its jobs
            # back at once (a deferral counts no failure) rather than leave them leased to
            # a caller that never sees the leases, waiting for their deadline to be reaped.
            self._give_back(leases)
            raise
        # A refused park (e.g. OOM: it is deny-oom) only means not parked; the rest stands.
        parked = park is not None and replies[nb + claim] == 1
        return done, leases, p.decode_ids(replies[-1]) if window else [], parked

    def _give_back(self, leases: Sequence[Lease]) -> None:
        for lease in leases:
            try:
                self.defer(lease, delay_ms=0)
            except EchoMQError:  # then its lease runs out and the reaper gives it back
                continue

    def park(self, token: str, *, lease_ms: int, ttl_ms: int) -> bool:
        """Park a consumer for hand-off on admission (``ttl_ms`` > 0), or withdraw it (0).

        True when parked (or withdrawn); False when pending has work, so nothing was
        written and the consumer should claim instead (docs/decisions/0018-hand-off.md).
        """
        return p.decode_count(self._run(h.park(self.k, token, lease_ms=lease_ms, ttl_ms=ttl_ms))) == 1

    def _retry(self, lease: Lease, delay_ms: int, error: str, mode: str) -> RetryOutcome:
        p.check_int("delay_ms", delay_ms, 0, p.MAX_DELAY_MS)
        if not isinstance(error, str):
            raise InvalidArgument(f"error must be a str, not {type(error).__name__}")
        if len(error) * 4 > self.options.max_error:  # only a long text pays for the encoding
            check_bytes("error", error.encode(errors="surrogatepass"), self.options.max_error)
        call = p.retry(self.k, self._lease(lease), delay_ms=delay_ms,
                       max_attempts=self.options.max_attempts, error=error, mode=mode)
        return p.decode_retry(self._run(call))

    def retry(self, lease: Lease, *, delay_ms: int, error: str = "",
                    give_up: bool = False) -> RetryOutcome:
        """Record a failed attempt; run again after ``delay_ms``, or dead at the limit
        (``give_up=True``: dead now, whatever the limit)."""
        if not isinstance(give_up, bool):
            raise InvalidArgument(f"give_up must be a bool, not {type(give_up).__name__}")
        return self._retry(lease, delay_ms, error, "dead" if give_up else "fail")

    def defer(self, lease: Lease, *, delay_ms: int) -> RetryOutcome:
        """Put the job back for ``delay_ms`` without counting a failure (rate budgets)."""
        return self._retry(lease, delay_ms, "", "defer")

    def job(self, job_id: str) -> dict[str, bytes] | None:
        """The row of one job, or None."""
        return p.decode_row(self._run(p.row(self.k, job_id)))

    # ------------------------------------------- upkeep and inspection (self.upkeep)
    def promote(self) -> int:
        """:meth:`Upkeep.promote`: due delayed jobs to pending (bounded)."""
        return self.upkeep.promote()

    def reap(self) -> tuple[int, int]:
        """:meth:`Upkeep.reap`: expired leases re-exposed; (requeued, dead)."""
        return self.upkeep.reap()

    def trim(self) -> int:
        """:meth:`Upkeep.trim`: retention of done, dead and expired rows (bounded)."""
        return self.upkeep.trim()

    def expire(self) -> tuple[int, int]:
        """:meth:`Upkeep.expire`: waiting jobs past their deadline end expired
        (bounded); (expired, dropped)."""
        return self.upkeep.expire()

    def purge_dead(self, *, limit: int = 1000) -> Bulk:
        """:meth:`Upkeep.purge_dead`."""
        return self.upkeep.purge_dead(limit=limit)

    def requeue_dead(self, *, limit: int = 1000) -> Bulk:
        """:meth:`Upkeep.requeue_dead`."""
        return self.upkeep.requeue_dead(limit=limit)

    def requeue(self, ids: Sequence[str]) -> int:
        """:meth:`Upkeep.requeue`: the named dead jobs back on pending."""
        return self.upkeep.requeue(ids)

    def purge(self, state: str, ids: Sequence[str]) -> int:
        """:meth:`Upkeep.purge`: delete the named done, dead or expired jobs."""
        return self.upkeep.purge(state, ids)

    def cancel(self, ids: Sequence[str]) -> list[CancelOutcome]:
        """:meth:`Upkeep.cancel`: one outcome per id (waiting ones cancelled now,
        running ones asked to stop; decision 0023)."""
        return self.upkeep.cancel(ids)

    def pending_size(self) -> int:
        return self.upkeep.pending_size()

    def stats(self) -> Stats:
        return self.upkeep.stats()

    def browse(self, state: str, *, offset: int = 0, limit: int = 50) -> list[JobView]:
        """:meth:`Upkeep.browse`: a page of jobs in ``state`` with their rows."""
        return self.upkeep.browse(state, offset=offset, limit=limit)

    def search(self, query: SearchQuery | None = None, *, cursor: str | None = None,
                     limit: int = 50, budget: int = 200, max_windows: int = 50) -> SearchPage:
        """Jobs matching ``query`` (:class:`~echomq.protocol.search.SearchQuery`: states,
        lane, error type or text, admission time range, id prefix), walked in windows of
        ``budget`` entries, each window a few read-only script calls of bounded work; at most
        ``limit`` hits and ``max_windows`` windows per call. Go on with the page's
        ``cursor`` (None: done). Decision 0037."""
        return search(self.connector, self.k, query or SearchQuery(), cursor=cursor,
                            limit=limit, budget=budget, max_windows=max_windows)

    # ------------------------------------------------- results and progress
    def result(self, job_id: str, *, timeout: float | None = 30.0) -> bytes:  # noqa: ASYNC109, RUF100 (the API asks for timeout=)
        """Wait until the job ends; its result (the bytes its handler returned; ``b""`` for
        none). Wakes on the queue's ``finished`` channel, never by polling; no end between
        the check and the wait is missed (docs/decisions/0023). ``timeout``: seconds,
        0..86,400, None for no limit, 0 to look once.

        Raises JobFailed (the job is dead; ``.error`` is its last error), JobCancelled,
        ResultTimeout (not ended in time), JobNotFound (never admitted, or its row is not
        kept: ``keep_done_ms=0`` keeps no result).
        """
        return wait_result(self.connector, self.k, job_id, timeout)

    def progress(self, job_id: str) -> bytes | None:
        """The last progress report of the job (kept with its row after it ends), or None
        if it made none; JobNotFound when there is no such job."""
        return read_progress(self.connector, self.k, job_id)

    def report_progress(self, lease: Lease, report: bytes) -> ProgressOutcome:
        """Record a progress report (bytes, at most 64 KiB) for a running attempt, fenced by
        it (the ``progress`` script): STALE if the attempt no longer holds a live lease,
        nothing written; STOP when recorded and the job was asked to stop (cancel)."""
        data = check_bytes("progress", report, MAX_PROGRESS)
        reply = p.decode_progress(self._run(p.progress(self.k, self._lease(lease), data)))
        return {1: ProgressOutcome.RECORDED, 2: ProgressOutcome.STOP}.get(reply, ProgressOutcome.STALE)
