# Generated from echomq/client/_async/admission.py by scripts/unasync_gen.py. Do not edit.
"""A queue's admission: one job or many onto the queue.

:class:`Queue`'s ``admit``/``enqueue``/``admit_many``/``enqueue_many`` hand over to
:class:`Admission` (as its upkeep methods hand over to :class:`Upkeep`,
docs/decisions/0017). One plain job takes ``enqueue.lua``, with its request encoded once
per queue (:class:`echomq.protocol.encoded.Enqueuer`); runs of plain jobs in a list take
``enqueue_batch.lua``, up to :data:`echomq.protocol.encoded.BATCH` jobs a call
(:class:`echomq.protocol.encoded.BatchEnqueuer`, docs/decisions/0027); any option takes ``admit.lua``.
Every argument is checked before the first write; a refusal of the server comes back as
its typed error (:func:`echomq.client._sync.memory.typed_refusals`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from echomq import protocol as p
from echomq.client._sync.memory import typed_refusals
from echomq.client._sync.seam import Reply, ScriptConnector
from echomq.client.replies import reply_code
from echomq.core.errors import EchoMQError, InvalidArgument, NotDurable, ServerBusy, ServerError
from echomq.core.model import QueueOptions, Verdict
from echomq.protocol import Call
from echomq.protocol.gate import check_priority
from echomq.protocol.scripts import Script

__all__ = ["Admission", "AdmitItem", "HeldItem"]

_HOLDER_ROUNDS = 8  # debounce rounds that find another holder before giving up (ServerBusy)
_MIN_FLUSH = 128  # admissions per flush, least (below it a flush's round trip outweighs it)

AdmitItem = tuple[str, bytes] | tuple[str, bytes, str | None]
"""One item of :meth:`Queue.admit_many`: ``(id, payload)`` or ``(id, payload, lane)``."""

HeldItem = tuple[str, bytes, str, str | None, int, str]
"""One item of :meth:`Admission.admit_held_many`: (id, payload, dedupe key, lane or
None, delay ms, the holder the admission expects or '')."""


class Admission:
    """Admission onto the queue ``k`` names (``queue.admission``)."""

    def __init__(self, connector: ScriptConnector, k: p.QueueKeys, options: QueueOptions,
                 name: str) -> None:
        self.connector = connector
        self.k = k
        self.options = options
        self.name = name
        self._enqueue = p.Enqueuer(k)
        self._batch = p.BatchEnqueuer(k)
        self._loaded: set[str] = set()  # scripts this queue has sent SCRIPT LOAD for

    def call(self, job_id: str, payload: object, lane: str | None, delay_ms: int,
                    serial: bool, max_attempts: int | None, priority: int = 0,
                    timeout_ms: int | None = None, window: p.Window | None = None,
                    holder: str | None = None, expires_ms: int | None = None) -> Call:
        """The call of one admission, every argument checked. With a dedupe ``window``,
        ``throttle`` or ``debounce`` (``holder``: the id a debounce expects to hold the
        key; None: the job's own id when the key is the id, else none). ``expires_ms``:
        a deadline to start by (``admit.lua``; decision 0045)."""
        data = p.check_payload(payload, self.options.max_payload)
        if (window is None and lane is None and not delay_ms and max_attempts is None
                and isinstance(serial, bool) and priority == 0 and type(priority) is int
                and timeout_ms is None and expires_ms is None):
            return self._enqueue(job_id, data)  # lua/enqueue.lua, its request encoded once
        lane_arg = p.check_lane(lane)
        p.check_int("delay_ms", delay_ms, 0, p.MAX_DELAY_MS)
        if max_attempts is not None:
            p.check_int("max_attempts", max_attempts, 1, p.MAX_ATTEMPTS)
        if not isinstance(serial, bool):
            raise InvalidArgument(f"serial must be a bool, not {type(serial).__name__}")
        level = check_priority(priority)
        if timeout_ms is not None:
            p.check_int("timeout_ms", timeout_ms, 1, p.MAX_DELAY_MS)
        p.check_expiry(expires_ms, delay_ms)
        if window is not None:
            key = job_id if window.key is None else window.key
            if window.mode == "debounce":
                if not lane_arg:  # its own serial lane: a new job waits for a running holder
                    lane_arg, serial = p.dedupe_lane(key), True
                elif not serial:
                    raise InvalidArgument("a debounced job on a lane needs serial=True (a new "
                                          "job must wait for a running holder), or no lane")
            if holder is None:
                holder = job_id if window.key is None else ""
            return p.deduped(self.k, job_id, data, key=key, window_ms=window.ms, mode=window.mode,
                             lane=lane_arg, delay_ms=delay_ms, serial=serial,
                             max_attempts=max_attempts, priority=level, timeout_ms=timeout_ms,
                             holder=holder, expires_ms=expires_ms)
        if not lane_arg and not delay_ms and max_attempts is None and not level \
                and timeout_ms is None and expires_ms is None:
            # No option: lua/enqueue.lua, the same write as admit.lua's without one, in a
            # smaller script (``serial`` means nothing without a lane).
            return p.enqueue(self.k, job_id, data)
        return p.admit(self.k, job_id, data, lane=lane_arg, delay_ms=delay_ms, serial=serial,
                       max_attempts=max_attempts, priority=level, timeout_ms=timeout_ms,
                       expires_ms=expires_ms)

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
        """Admit one job: ENQUEUED, DUPLICATE, REPLACED or KIND (the one admission verb).

        Optionally onto ``lane`` (fair among lanes; ``serial=True`` holds the lane to one
        job in flight, so its jobs run in order), after ``delay_ms`` (server clock), with
        its own ``max_attempts``, at ``priority`` 0..3 (a higher level is claimed first;
        within a level lanes stay fair; a level ages so none starves,
        docs/decisions/0022-claim-gate.md), with its own handler ``timeout_ms`` (kept in its
        row; a consumer applies it instead of its own ``timeout_ms``), with a deadline
        ``expires_ms`` (1 ms..366 days, more than ``delay_ms``): a job not started within
        that many ms of its admission (server clock; a retry's wait counts) ends ``expired``
        and never runs (docs/decisions/0045-expiry.md). Bad arguments raise
        InvalidArgument (InvalidJobId, InvalidPayload, PayloadTooLarge, ...) before any I/O; the ranges are in
        :mod:`echomq.protocol`. A refusal of the server is raised as its typed error.

        With ``dedupe_ms`` the job's dedupe key (``dedupe_key``, else its id) is held that
        long whatever the row's retention (:mod:`echomq.protocol.dedupe`): ``dedupe_mode``
        "throttle" (the default: later admissions answer DUPLICATE) or "debounce" (a later
        admission replaces the payload of the waiting holder and moves its due time:
        REPLACED).
        """
        window = p.check_window(dedupe_ms, dedupe_key, dedupe_mode)
        if window is not None:
            return (self.admit_held(job_id, payload, window, lane=lane, delay_ms=delay_ms,
                                          serial=serial, max_attempts=max_attempts,
                                          priority=priority, timeout_ms=timeout_ms,
                                          expires_ms=expires_ms))[0]
        call = self.call(job_id, payload, lane, delay_ms, serial, max_attempts, priority,
                         timeout_ms, expires_ms=expires_ms)
        verdict = p.decode_verdict(self._run(call))
        if isinstance(verdict, EchoMQError):
            raise verdict
        return verdict

    def _run(self, call: Call) -> Reply:
        if self.options.durable_replicas:
            return (self.pipeline([call]))[0]
        try:
            return self.connector.run(call)
        except EchoMQError as exc:
            (reply,) = typed_refusals(self.connector, self.name, [exc])
            return reply

    def admit_held(
        self, job_id: str, payload: bytes, window: p.Window, *, lane: str | None = None,
        delay_ms: int = 0, serial: bool = False, max_attempts: int | None = None,
        priority: int = 0, timeout_ms: int | None = None, expires_ms: int | None = None,
    ) -> tuple[Verdict, str]:
        """:meth:`admit` with a checked dedupe ``window``: the verdict and the id of the job
        that holds the key after it (this job's id when ENQUEUED; the holder's when
        DUPLICATE or REPLACED). A debounce that finds another holder than it expected
        asks again naming it (peek-then-act; a few rounds, each a changed holder)."""
        holder: str | None = None
        for _ in range(_HOLDER_ROUNDS):
            reply = self._run(self.call(job_id, payload, lane, delay_ms, serial,
                                              max_attempts, priority, timeout_ms, window, holder,
                                              expires_ms=expires_ms))
            holder = p.deduped_retry(reply)
            if holder is None:
                break
        else:
            raise ServerBusy(f"queue {self.name!r}: the holder of dedupe key {window.key!r} "
                             f"changed {_HOLDER_ROUNDS} times during one admission; try again")
        verdict, who = p.decode_deduped(reply)
        if isinstance(verdict, EchoMQError):
            raise verdict
        return verdict, who or job_id

    def admit_held_many(
        self, items: Sequence[HeldItem], *, dedupe_ms: int, dedupe_mode: str = "debounce",
    ) -> list[tuple[Verdict, str] | EchoMQError]:
        """:meth:`admit_held` of many jobs, pipelined: each item ``(id, payload, dedupe key,
        lane or None, delay ms, the holder it expects or '')``, a serial lane when it has
        one. Per item, in input order: (verdict, the id holding its key after it) or its
        typed error, nothing written for it. The items a debounce answers with another
        holder than named are sent again naming it (a few rounds, then ServerBusy)."""
        out: list[Any] = [None] * len(items)  # each item set below: a reply, its error or ServerBusy
        named = {i: item[5] for i, item in enumerate(items)}
        todo = list(range(len(items)))
        for _ in range(_HOLDER_ROUNDS):
            calls, at = [], []
            for i in todo:
                job_id, payload, key, lane, delay_ms, _ = items[i]
                try:
                    window = p.check_window(dedupe_ms, key, dedupe_mode)
                    calls.append(self.call(job_id, payload, lane, delay_ms, lane is not None,
                                           None, window=window, holder=named[i]))
                    at.append(i)
                except EchoMQError as exc:
                    out[i] = exc
            todo = []
            for i, reply in zip(at, self.pipeline(calls) if calls else [], strict=True):
                other = p.deduped_retry(reply)
                if other is not None:  # another holder than named: name it and ask again
                    named[i] = other
                    todo.append(i)
                    continue
                verdict, who = p.decode_deduped(reply)
                out[i] = verdict if isinstance(verdict, EchoMQError) else (verdict, who or items[i][0])
            if not todo:
                break
        for i in todo:
            out[i] = ServerBusy(f"queue {self.name!r}: the holder of dedupe key {items[i][2]!r} "
                                f"changed {_HOLDER_ROUNDS} times during one admission; try again")
        return out

    def admit_many(
        self, items: Iterable[AdmitItem], *, serial: bool = False, priority: int = 0,
        timeout_ms: int | None = None, delay_ms: int = 0, max_attempts: int | None = None,
        dedupe_ms: int | None = None, dedupe_mode: str | None = None,
        expires_ms: int | None = None,
    ) -> list[Verdict | EchoMQError]:
        """Admit many jobs: ``SCRIPT LOAD`` once, then pipelined calls, in input order.

        Each item is ``(id, payload)`` or ``(id, payload, lane)``; ``serial`` applies to
        every item with a lane, as in :meth:`Queue.admit`. Returns one verdict per item, in input
        order. An item that cannot be sent (a malformed id, a bad payload) gets its typed
        error in its place and nothing is written for it; the other items are unaffected.
        An id repeated inside the batch is admitted once and reported DUPLICATE after.
        Runs of plain jobs (no lane, no option, a JOB id) go as ``enqueue_batch`` calls of
        up to :data:`echomq.protocol.encoded.BATCH` jobs, each job atomic as alone
        (docs/decisions/0027-batch-admission.md); any other item is its own call. The
        list is not a transaction. ``priority``, ``timeout_ms``, ``delay_ms`` and
        ``max_attempts`` apply to every item, as in :meth:`Queue.admit` (any of them
        makes each item its own ``admit`` call, still pipelined in input order).
        ``dedupe_ms``/``dedupe_mode`` give each item a dedupe window on its own id, as
        :meth:`admit` does (each item its own ``throttle`` or ``debounce`` call).
        ``expires_ms`` gives every item a deadline, each counted from its own admission.
        """
        window = p.check_window(dedupe_ms, None, dedupe_mode)
        level = check_priority(priority)
        if timeout_ms is not None:
            p.check_int("timeout_ms", timeout_ms, 1, p.MAX_DELAY_MS)
        p.check_int("delay_ms", delay_ms, 0, p.MAX_DELAY_MS)
        if max_attempts is not None:
            p.check_int("max_attempts", max_attempts, 1, p.MAX_ATTEMPTS)
        p.check_expiry(expires_ms, delay_ms)
        listed: list[Any] = items if type(items) is list else list(items)
        out: list[Verdict | EchoMQError] = [Verdict.DUPLICATE] * len(listed)  # placeholders
        plain = (isinstance(serial, bool) and not level and timeout_ms is None and not delay_ms
                 and max_attempts is None and window is None and expires_ms is None)
        limit = self.options.max_payload
        segments: list[_Run | tuple[int, Call]] = []
        whole = _all_pairs(listed, limit) if plain else None  # the common list, a few passes
        if whole is not None:
            segments.append(whole)
        else:
            self._classify(listed, (serial, priority, timeout_ms, delay_ms, max_attempts,
                                    expires_ms), plain, segments, out, window)
        calls, where = self._calls(segments)
        for script in {c.script.sha: c.script for c in calls}.values():  # at most three
            self._preload(script)
        if calls:
            # At least four flushes of calls per list (of at most options.batch jobs, at
            # least _MIN_FLUSH): the server runs one while the client builds the next, so
            # a list of 1,000 keeps two flushes in flight as a list of 50,000 does.
            # (Durable admission keeps whole flushes: each one ends with a WAIT.)
            jobs = sum(len(w) if type(w) is not int else 1 for w in where)
            flush = self.options.batch
            if not self.options.durable_replicas:
                flush = min(flush, max(_MIN_FLUSH, -(-jobs // 4)))
            replies = self.pipeline(calls, flush=max(1, flush * len(calls) // jobs))
            for at, reply in zip(where, replies, strict=True):
                if type(at) is int:
                    out[at] = _verdict(reply)
                else:
                    _spread(at, reply, out)
        return out

    def _classify(self, items: list[Any],
                  opts: tuple[bool, int, int | None, int, int | None, int | None],
                  plain: bool, segments: list[_Run | tuple[int, Call]],
                  out: list[Verdict | EchoMQError], window: p.Window | None = None) -> None:
        """Item by item: runs of plain jobs, a call for each other item, errors in place.
        ``opts``: every item's (serial, priority, timeout_ms, delay_ms, max_attempts,
        expires_ms)."""
        serial, priority, timeout_ms, delay_ms, max_attempts, expires_ms = opts
        limit, valid, run = self.options.max_payload, p.Enqueuer.valid_id, None
        at: list[int] = []  # the item indices of the current run
        for i, item in enumerate(items):
            job_id: Any = None
            if plain and type(item) is tuple and len(item) == 2:
                job_id, data = item
                if not (type(data) is bytes and len(data) <= limit and valid(job_id)):
                    job_id = None  # the general path below types its error
            if job_id is None:
                shape = len(item) if isinstance(item, tuple | list) else 0
                if shape not in (2, 3):
                    out[i] = InvalidArgument(
                        f"item {i}: expected an (id, payload) pair or an (id, payload, lane) triple")
                    continue
                try:
                    call = self.call(item[0], item[1], item[2] if shape == 3 else None, delay_ms,
                                     serial, max_attempts, priority, timeout_ms, window,
                                     expires_ms=expires_ms)
                except EchoMQError as exc:
                    out[i] = exc
                    continue
                if call.script is not p.Enqueuer.script:
                    segments.append((i, call))
                    run = None
                    continue
                job_id, data = call.args[0], call.args[1]
            if not job_id.startswith("JOB"):  # enqueue.lua answers it KIND, alone
                segments.append((i, self._enqueue.build(job_id, data)))
                run = None
                continue
            if run is None:
                at = []
                run = _Run(at, [], [])
                segments.append(run)
            at.append(i)
            run.ids.append(job_id)
            run.payloads.append(data)

    def _calls(self, segments: list[_Run | tuple[int, Call]]) -> tuple[list[Call], list[Any]]:
        """The calls of the segments, in order, and the item index (or indices) of each."""
        plain = sum(len(s.ids) for s in segments if type(s) is _Run)
        size = p.batch_size(plain, self.options.batch)
        build = self._batch.build
        calls: list[Call] = []
        where: list[Any] = []
        for s in segments:
            if not isinstance(s, _Run):
                calls.append(s[1])
                where.append(s[0])
                continue
            for a in range(0, len(s.ids), size):
                calls.append(build(s.ids[a : a + size], s.payloads[a : a + size]))
                where.append(s.where[a : a + size])
        return calls, where

    def _preload(self, script: Script) -> None:
        """``SCRIPT LOAD`` before a batch, so its calls need no NOSCRIPT round. A server that
        refuses it for back-pressure refuses the batch too: each item gets its typed error.

        Once per queue object and script: the next batch's calls find it loaded, or (after a
        restart, a failover, ``SCRIPT FLUSH``) answer NOSCRIPT, and the connector loads the
        script and sends again only the calls that did not run. A sequential batch pays no
        round trip of its own for the load."""
        if script.sha in self._loaded:
            return
        try:
            self.connector.load(script)
        except EchoMQError as exc:
            if reply_code(exc) not in ("BUSY", "OOM"):
                raise
            return
        self._loaded.add(script.sha)

    def pipeline(self, calls: Sequence[Call], flush: int | None = None) -> list[Reply]:
        """Pipelined admission calls. With ``durable_replicas`` each flush ends with a WAIT
        on its connection, and a job written but acknowledged by too few replicas gets
        :class:`NotDurable` in its place (a batch's reply becomes a list, one per job).
        DUPLICATE carries no durability claim: WAIT vouches only for the writes of the call
        it follows."""
        o = self.options
        if not o.durable_replicas:
            replies = self.connector.pipeline(calls, flush=flush)
            return typed_refusals(self.connector, self.name, replies)
        out: list[Reply] = []
        step = flush or len(calls)
        for start in range(0, len(calls), step):
            replies, acked = self.connector.pipeline_wait(
                calls[start : start + step], replicas=o.durable_replicas,
                timeout_ms=o.durable_timeout_ms)
            for reply, n in zip(replies, acked, strict=True):
                if n < o.durable_replicas and (reply == 1 or isinstance(reply, bytes) or (
                        isinstance(reply, list) and reply[:1] in ([1], [2]))):
                    short = NotDurable(
                        f"queue {self.name!r}: {n} of {o.durable_replicas} replicas acknowledged "
                        f"the admission within {o.durable_timeout_ms} ms; it is written on the "
                        "primary only and may be lost on failover")
                    # a batch's reply: each enqueued job of it is not durable
                    reply = [short if c == 49 else 0 for c in reply] if isinstance(
                        reply, bytes) else short
                out.append(reply)
        return typed_refusals(self.connector, self.name, out)


class _Run:
    """Consecutive plain jobs of a list: their item indices, ids and payloads."""

    __slots__ = ("ids", "payloads", "where")

    def __init__(self, where: Sequence[int], ids: list[str], payloads: list[bytes]) -> None:
        self.where, self.ids, self.payloads = where, ids, payloads


def _all_pairs(items: list[Any], limit: int) -> _Run | None:
    """The whole list as one run of plain jobs if every item is an ``(id, payload)``
    tuple, every id a str of the JOB kind and a valid shape, every payload bytes within
    ``limit``, else None: a few passes over the list (C loops), no Python step per item;
    the run keeps the id and payload lists the checks built."""
    if not items or set(map(type, items)) != {tuple} or set(map(len, items)) != {2}:
        return None
    payloads = [d for _, d in items]
    if set(map(type, payloads)) != {bytes} or max(map(len, payloads)) > limit:
        return None
    ids = [i for i, _ in items]
    return _Run(range(len(items)), ids, payloads) if p.BatchEnqueuer.valid_ids(ids) else None


def _verdict(reply: Reply) -> Verdict | EchoMQError:
    # decode_verdict, with its two common replies first (True == 1: not a reply)
    if type(reply) is int:
        if reply == 1:
            return Verdict.ENQUEUED
        if reply == 0:
            return Verdict.DUPLICATE
    if type(reply) is list:  # throttle's or debounce's {verdict, holder}
        return p.decode_deduped(reply)[0]
    return p.decode_verdict(reply)


def _spread(where: Sequence[int], reply: Reply, out: list[Verdict | EchoMQError]) -> None:
    """One ``enqueue_batch`` reply (a digit per job; a list per job if not durable; an
    error for all) onto the jobs' places in ``out``."""
    if type(reply) is bytes and len(reply) == len(where):
        if b"0" not in reply and type(where) is range and where.step == 1:
            out[where.start : where.stop] = [Verdict.ENQUEUED] * len(where)
            return
        for i, c in zip(where, reply, strict=True):
            out[i] = Verdict.ENQUEUED if c == 49 else Verdict.DUPLICATE if c == 48 else \
                ServerError(f"unexpected admission verdict {chr(c)!r}")
    elif type(reply) is list and len(reply) == len(where):
        for i, one in zip(where, reply, strict=True):
            out[i] = _verdict(one)
    else:
        verdict = _verdict(reply) if isinstance(reply, BaseException) else ServerError(
            f"unexpected admission reply: {reply!r}")
        for i in where:
            out[i] = verdict
