"""OpenTelemetry: the trace context travels with the job (stored in its row at admission);
enqueue, claim, handle and complete spans share it (the SDK's in-memory exporter)."""

from __future__ import annotations

import asyncio
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from echomq import AsyncQueue, Verdict, generate
from echomq.ops.worker import Worker, WorkerSettings
from echomq.runtime.tracing import traced_admit
from tests.echomq import worker_targets
from tests.echomq._async.support import wait_for


async def test_a_job_carries_its_trace_from_enqueue_to_complete(conn: Any, qname: str) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    good, bad = AsyncQueue(conn, qname), AsyncQueue(conn, qname + "-bad")
    ok_id, bad_id = generate("JOB"), generate("JOB")
    assert await traced_admit(good, ok_id, b"x", tracer_provider=provider) is Verdict.ENQUEUED
    assert await traced_admit(bad, bad_id, b"x", tracer_provider=provider) is Verdict.ENQUEUED
    row = await good.job(ok_id)
    assert row is not None and len(row["traceparent"]) == 55  # in the row, from admission on
    # A duplicate admission keeps the first context.
    assert await traced_admit(good, ok_id, b"x", tracer_provider=provider) is Verdict.DUPLICATE
    assert (await good.job(ok_id) or {})["traceparent"] == row["traceparent"]

    settings = WorkerSettings(handlers={good.name: worker_targets.ok, bad.name: worker_targets.boom},
                              beat_ms=20, lease_ms=5000, tracing=True, tracer_provider=provider)
    worker = Worker(settings, connector=conn)
    task = asyncio.create_task(worker.run())
    try:
        async def finished() -> bool:
            names = [s.name for s in exporter.get_finished_spans()]
            return f"{good.name} complete" in names and f"{bad.name} complete" in names
        await wait_for(finished, within=20)
    finally:
        worker.stop()
        await asyncio.wait_for(task, 20)

    spans = exporter.get_finished_spans()
    by_name = {s.name: s for s in spans}
    enqueue = next(s for s in spans if s.name == f"{good.name} enqueue")
    trace_id = enqueue.context.trace_id
    for step in ("claim", "handle", "complete"):
        span = by_name[f"{good.name} {step}"]
        assert span.context.trace_id == trace_id, step  # one trace from producer to finish
        assert span.parent is not None and span.parent.span_id == enqueue.context.span_id, step
        assert span.attributes is not None and span.attributes["messaging.message.id"] == ok_id
        assert span.start_time is not None and span.end_time is not None
        assert span.start_time <= span.end_time
    assert enqueue.kind is SpanKind.PRODUCER and by_name[f"{good.name} handle"].kind is SpanKind.CONSUMER
    assert by_name[f"{good.name} claim"].end_time <= by_name[f"{good.name} handle"].start_time  # type: ignore[operator]
    failed = by_name[f"{bad.name} handle"]
    assert failed.status.status_code is StatusCode.ERROR and "boom" in (failed.status.description or "")
    assert failed.context.trace_id != trace_id  # its own admission, its own trace
