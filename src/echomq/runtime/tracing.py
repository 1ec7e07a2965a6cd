"""OpenTelemetry traces (the ``tracing`` extra: ``pip install echomq[tracing]``).

The trace context travels with the job: :func:`traced_admit` opens an
``echomq.enqueue`` span (kind PRODUCER) and stores its W3C ``traceparent`` in the job's
row, in the same flush as the admission (the ``trace_attach`` script runs right after
``admit`` on the same connection; it only sets a context the row does not have, and
never creates a row, so a duplicate keeps its own and a finished, deleted job stays
deleted). A worker with ``WorkerSettings(tracing=True)`` reads it back when a job
starts and records, as children of the producer's span:

* ``echomq.claim``: from the claim (the lease's server time) to the handler's start;
* ``echomq.handle`` (kind CONSUMER): the handler, with its outcome and any exception;
* ``echomq.complete``: writing the outcome (complete, retry or defer).

These are the consumer's hooks (:meth:`JobTracer.hooks`, :mod:`echomq.core.hooks`).

Attributes follow the messaging conventions: ``messaging.system`` = ``echomq``,
``messaging.destination.name`` = the queue, ``messaging.message.id`` = the job id
(span attributes, unlike metric labels, may carry an id). Without a configured SDK the
API's no-op tracer makes all of this free.
"""

from __future__ import annotations

import time
from contextvars import ContextVar
from typing import Any

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace import SpanKind, Status, StatusCode
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("tracing needs the extra: pip install 'echomq[tracing]'") from exc

from echomq.client._async.queue import AsyncQueue
from echomq.client._async.sharded import AsyncShardedQueue
from echomq.core.errors import EchoMQError
from echomq.core.hooks import Hooks
from echomq.core.model import Lease, Verdict
from echomq.core.outcomes import Backoff, Defer, Outcome
from echomq.protocol import QueueKeys, trace_attach
from echomq.protocol.decoders import text

__all__ = ["JobTracer", "traced_admit"]

_PROPAGATOR = TraceContextTextMapPropagator()
_FIELD = "traceparent"


def _tracer(provider: Any = None) -> trace.Tracer:
    return trace.get_tracer("echomq", tracer_provider=provider)


def _attrs(queue: str, job_id: str) -> dict[str, str]:
    return {"messaging.system": "echomq", "messaging.destination.name": queue,
            "messaging.message.id": job_id}


async def traced_admit(queue: AsyncQueue, job_id: str, payload: bytes, *, lane: str | None = None,
                       delay_ms: int = 0, serial: bool = False, max_attempts: int | None = None,
                       tracer_provider: Any = None) -> Verdict:
    """``queue.admit`` inside an ``echomq.enqueue`` span whose context the row keeps."""
    with _tracer(tracer_provider).start_as_current_span(
            f"{queue.name} enqueue", kind=SpanKind.PRODUCER, attributes=_attrs(queue.name, job_id)) as span:
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier)
        admit = queue.admission.call(job_id, payload, lane, delay_ms, serial, max_attempts)
        attach = trace_attach(queue.k, job_id, carrier.get(_FIELD, ""))
        await queue.fence()
        replies = await queue.connector.pipeline([admit, attach])
        if isinstance(replies[0], Exception):
            raise replies[0]
        verdict = Verdict.ENQUEUED if replies[0] == 1 else Verdict.DUPLICATE
        if isinstance(replies[1], Exception):
            raise EchoMQError(f"trace context not stored: {replies[1]}")
        span.set_attribute("echomq.verdict", verdict.value)
        return verdict


class JobTracer:
    """A worker's spans for one queue: claim, handle and complete, under the job's context.

    They are :class:`~echomq.core.hooks.Hooks` (:meth:`hooks`): ``before`` reads the producer's
    context, records the claim span and opens the handle span as the current one (so the
    handler's own spans are its children); ``on_failure`` records the exception;
    ``after`` ends the handle span with the outcome; ``finished`` records the complete
    span. The open span lives in a context variable of the handler's task, so an attempt
    cancelled in between (a lost lease) leaves nothing behind.
    """

    def __init__(self, queue: AsyncQueue | AsyncShardedQueue, *, lease_ms: int, clock_offset_ms: float = 0.0,
                 tracer_provider: Any = None) -> None:
        self.queue = queue
        self.lease_ms = lease_ms
        self.clock_offset_ms = clock_offset_ms  # server clock minus ours
        self.tracer = _tracer(tracer_provider)
        # (the job's context, the token of the attach, the handle span) of this task's attempt
        self._open: ContextVar[tuple[Any, Any, Any] | None] = ContextVar(
            f"echomq-trace-{queue.name}", default=None)

    async def context_of(self, lease: Lease) -> Any:
        """The producer's context stored in the job's row (an empty context if none)."""
        # The lease's own queue: a sharded queue's lease names its shard.
        value = await self.queue.connector.command("HGET", QueueKeys.of(lease.queue).job(lease.id),
                                                   _FIELD)
        carrier = {_FIELD: text(value)} if value else {}
        return _PROPAGATOR.extract(carrier)

    def hooks(self) -> Hooks:
        return Hooks(before=[self.before], on_failure=[self.failed], after=[self.after],
                     finished=[self.finished])

    def _attrs(self, lease: Lease) -> dict[str, Any]:
        return _attrs(self.queue.name, lease.id) | {"echomq.attempt": lease.attempt}

    async def before(self, lease: Lease) -> None:
        ctx = await self.context_of(lease)
        started_ns = time.time_ns()
        claimed_ns = int((lease.deadline_ms - self.lease_ms - self.clock_offset_ms) * 1_000_000)
        claim = self.tracer.start_span(f"{self.queue.name} claim", context=ctx, attributes=self._attrs(lease),
                                       start_time=min(claimed_ns, started_ns))
        claim.end(end_time=started_ns)
        span = self.tracer.start_span(f"{self.queue.name} handle", context=ctx, kind=SpanKind.CONSUMER,
                                      attributes=self._attrs(lease))
        token = otel_context.attach(trace.set_span_in_context(span, ctx))
        self._open.set((ctx, token, span))

    def failed(self, lease: Lease, error: BaseException, seconds: float) -> None:
        opened = self._open.get()
        if opened is not None:
            opened[2].record_exception(error)

    def after(self, lease: Lease, outcome: Outcome, seconds: float) -> None:
        opened = self._open.get()
        if opened is None:
            return
        ctx, token, span = opened
        kind = ("failed" if isinstance(outcome, Backoff) else
                "deferred" if isinstance(outcome, Defer) else "processed")
        span.set_attribute("echomq.outcome", kind)
        if isinstance(outcome, Backoff):
            span.set_status(Status(StatusCode.ERROR, outcome.error.split("\n", 1)[0]))
        span.end()
        otel_context.detach(token)
        self._open.set((ctx, None, None))

    def finished(self, lease: Lease, outcome: Outcome, began: float, ended: float) -> None:
        """The ``complete`` span of the written outcome."""
        opened = self._open.get()
        if opened is None:
            return
        self._open.set(None)
        span = self.tracer.start_span(f"{self.queue.name} complete", context=opened[0],
                                      attributes=self._attrs(lease), start_time=int(began * 1e9))
        span.end(end_time=int(ended * 1e9))
