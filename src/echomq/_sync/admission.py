# Generated from echomq/_async/admission.py by scripts/unasync_gen.py. Do not edit.
"""A queue's admission: one job or many onto the queue, each item one script call.

:class:`Queue`'s ``admit``/``enqueue``/``admit_many``/``enqueue_many`` hand over to
:class:`Admission` (as its upkeep methods hand over to :class:`Upkeep`,
docs/decisions/0017). Plain ``(id, payload)`` items take ``enqueue.lua`` with its request
encoded once per queue (:class:`echomq.protocol.Enqueuer`); any option takes ``admit.lua``.
Every argument is checked before the first write; a refusal of the server comes back as
its typed error (:func:`echomq._sync.memory.typed_refusals`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from echomq import protocol as p
from echomq._sync.memory import typed_refusals
from echomq._sync.seam import Reply, ScriptConnector
from echomq.errors import EchoMQError, InvalidArgument, NotDurable
from echomq.gate import check_priority
from echomq.model import QueueOptions, Verdict
from echomq.protocol import Call
from echomq.replies import reply_code
from echomq.scripts import Script

__all__ = ["Admission", "AdmitItem"]

_MIN_FLUSH = 128  # admissions per flush, least (below it a flush's round trip outweighs it)

AdmitItem = tuple[str, bytes] | tuple[str, bytes, str | None]
"""One item of :meth:`Queue.admit_many`: ``(id, payload)`` or ``(id, payload, lane)``."""


class Admission:
    """Admission onto the queue ``k`` names (``queue.admission``)."""

    def __init__(self, connector: ScriptConnector, k: p.QueueKeys, options: QueueOptions,
                 name: str) -> None:
        self.connector = connector
        self.k = k
        self.options = options
        self.name = name
        self._enqueue = p.Enqueuer(k)
        self._loaded: set[str] = set()  # scripts this queue has sent SCRIPT LOAD for

    def call(self, job_id: str, payload: object, lane: str | None, delay_ms: int,
                    serial: bool, max_attempts: int | None, priority: int = 0,
                    timeout_ms: int | None = None) -> Call:
        data = p.check_payload(payload, self.options.max_payload)
        if (lane is None and not delay_ms and max_attempts is None and isinstance(serial, bool)
                and priority == 0 and type(priority) is int and timeout_ms is None):
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
        if not lane_arg and not delay_ms and max_attempts is None and not level \
                and timeout_ms is None:
            # No option: lua/enqueue.lua, the same write as admit.lua's without one, in a
            # smaller script (``serial`` means nothing without a lane).
            return p.enqueue(self.k, job_id, data)
        return p.admit(self.k, job_id, data, lane=lane_arg, delay_ms=delay_ms, serial=serial,
                       max_attempts=max_attempts, priority=level, timeout_ms=timeout_ms)

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
    ) -> Verdict:
        """Admit one job: ENQUEUED, DUPLICATE or KIND (the one admission verb).

        Optionally onto ``lane`` (fair among lanes; ``serial=True`` holds the lane to one
        job in flight, so its jobs run in order), after ``delay_ms`` (server clock), with
        its own ``max_attempts``, at ``priority`` 0..3 (a higher level is claimed first;
        within a level lanes stay fair; a level ages so none starves,
        docs/decisions/0022-claim-gate.md), with its own handler ``timeout_ms`` (kept in its
        row; a consumer applies it instead of its own ``timeout_ms``). Bad arguments raise
        InvalidArgument (InvalidJobId, InvalidPayload, PayloadTooLarge, ...) before any I/O; the ranges are in
        :mod:`echomq.protocol`. A refusal of the server is raised as its typed error.
        """
        call = self.call(job_id, payload, lane, delay_ms, serial, max_attempts, priority,
                                timeout_ms)
        if self.options.durable_replicas:
            reply = (self.pipeline([call]))[0]
        else:
            try:
                reply = self.connector.run(call)
            except EchoMQError as exc:
                (reply,) = typed_refusals(self.connector, self.name, [exc])
        verdict = p.decode_verdict(reply)
        if isinstance(verdict, EchoMQError):
            raise verdict
        return verdict

    def admit_many(
        self, items: Iterable[AdmitItem], *, serial: bool = False, priority: int = 0,
        timeout_ms: int | None = None,
    ) -> list[Verdict | EchoMQError]:
        """Admit many jobs: ``SCRIPT LOAD`` once, then one pipelined ``EVALSHA`` per item.

        Each item is ``(id, payload)`` or ``(id, payload, lane)``; ``serial`` applies to
        every item with a lane, as in :meth:`Queue.admit`. Returns one verdict per item, in input
        order. An item that cannot be sent (a malformed id, a bad payload) gets its typed
        error in its place and nothing is written for it; the other items are unaffected.
        An id repeated inside the batch is admitted once and reported DUPLICATE after.
        Each item is atomic on its own; the batch is not a transaction. Items go out in
        flushes of ``options.batch``. ``priority`` and ``timeout_ms`` apply to every item,
        as in :meth:`Queue.admit`.
        """
        level = check_priority(priority)
        if timeout_ms is not None:
            p.check_int("timeout_ms", timeout_ms, 1, p.MAX_DELAY_MS)
        out: list[Verdict | EchoMQError] = []
        # Each admitted item's call, or for a plain (id, payload) item the pair itself: the
        # connector builds its call when the wire reaches its flush (p.LazyCalls).
        entries: list[Call | tuple[str, bytes]] = []
        where: list[int] = []
        scripts: dict[str, Script] = {}
        enqueue, limit, valid = self._enqueue, self.options.max_payload, p.Enqueuer.valid_id
        # else every item is refused below, as admit refuses it (or has a priority or a
        # timeout: admit.lua)
        plain = isinstance(serial, bool) and not level and timeout_ms is None
        for i, item in enumerate(items):
            if plain and type(item) is tuple and len(item) == 2:
                # The common item, a valid id and a bytes payload within the limit: its
                # call (enqueue.lua's, as _admit_call would build it) is built later. Any
                # other item takes the general path below, which types its error.
                job_id, payload = item
                if type(payload) is bytes and len(payload) <= limit and valid(job_id):
                    entries.append(item)
                    out.append(Verdict.DUPLICATE)  # placeholder, replaced below
                    where.append(i)
                    continue
            shape = len(item) if isinstance(item, tuple | list) else 0
            if shape not in (2, 3):
                out.append(InvalidArgument(
                    f"item {i}: expected an (id, payload) pair or an (id, payload, lane) triple"))
                continue
            job_id, payload, *rest = item
            try:
                call = self.call(job_id, payload, rest[0] if rest else None, 0, serial, None,
                                        priority, timeout_ms)
            except EchoMQError as exc:
                out.append(exc)
                continue
            entries.append(call)
            scripts[call.script.sha] = call.script
            out.append(Verdict.DUPLICATE)  # placeholder, replaced below
            where.append(i)
        if len(scripts) < len(entries):  # some entries are plain pairs
            scripts[p.Enqueuer.script.sha] = p.Enqueuer.script
        for script in scripts.values():  # at most two
            self._preload(script)
        if entries:
            # At least four flushes per batch (of at most options.batch, at least
            # _MIN_FLUSH calls): the server runs the first while the client builds the next,
            # so a call of 1,000 keeps two flushes in flight as a call of 50,000 does.
            # (Durable admission keeps whole flushes: each one ends with a WAIT.)
            flush = self.options.batch
            if not self.options.durable_replicas:
                flush = min(flush, max(_MIN_FLUSH, -(-len(entries) // 4)))
            replies = self.pipeline(p.LazyCalls(enqueue, entries), flush=flush)
            enqueued, duplicate, decode = Verdict.ENQUEUED, Verdict.DUPLICATE, p.decode_verdict
            for i, reply in zip(where, replies, strict=True):
                # decode_verdict, with its two common replies first (True == 1: not a reply)
                out[i] = (enqueued if reply == 1 and type(reply) is int else
                          duplicate if reply == 0 and type(reply) is int else decode(reply))
        return out

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
        :class:`NotDurable` in its place. DUPLICATE carries no durability claim: WAIT
        vouches only for the writes of the call it follows."""
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
                if reply == 1 and n < o.durable_replicas:
                    reply = NotDurable(
                        f"queue {self.name!r}: {n} of {o.durable_replicas} replicas acknowledged "
                        f"the admission within {o.durable_timeout_ms} ms; it is written on the "
                        "primary only and may be lost on failover")
                out.append(reply)
        return typed_refusals(self.connector, self.name, out)
