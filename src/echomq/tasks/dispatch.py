"""The handler a worker runs for a typed-task app's queue: open the envelope, find the
task, decode its arguments, call it, encode its result.

A payload that is not an envelope this app reads, or names a task the app does not
have, is a failed attempt with a typed error (:class:`~echomq.tasks.errors.UnreadablePayload`,
:class:`~echomq.tasks.errors.UnknownTask`: the row keeps its type, message and
traceback), never run and never a dead worker: the consumer records it as any failing
handler (the job runs again, dead after its attempts). An exception of the task is
recorded the same way (logged, the ``on_failure`` hooks called with it), its outcome
shaped by the task's retry policy (``retry_on``, ``give_up_on``, ``backoff``:
:meth:`~echomq.tasks.task.Task.failed`, attached by
:func:`~echomq.runtime.handling.shape_failure`). A plain ``def`` task runs in a
thread of the app's pool, so heartbeats go on meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from echomq.client._async.queue import AsyncQueue
from echomq.core.model import Lease
from echomq.core.outcomes import Ack, Backoff, Defer, Outcome
from echomq.runtime.handling import shape_failure
from echomq.tasks.context import TaskContext
from echomq.tasks.errors import UnknownTask, UnreadablePayload
from echomq.tasks.host import Host
from echomq.tasks.serializer import envelope_head, open_envelope
from echomq.tasks.task import Task
from echomq.tasks.workflows import BATCH_TASK, STEP_MODES, run_batch, step_values

__all__ = ["Dispatcher"]

log = logging.getLogger("echomq.tasks")
_PASSED = (Defer, Backoff)  # outcomes a task may return as they are (a rate budget's Defer)


class Dispatcher:
    """The ``async`` handler of one queue for ``app``'s tasks. ``bound_to(queue)`` gives
    one that also hands its tasks a :class:`TaskContext` on that queue (the worker does)."""

    def __init__(self, app: Host, queue: str, bound: AsyncQueue | None = None) -> None:
        self.app, self.queue_name, self._queue = app, queue, bound
        self._format = app.serializer.format
        self._prefix = envelope_head(app.serializer, "")[:-1]  # b"EMQT1 json "
        self._heads: dict[bytes, Task[Any, Any]] = {}  # task name (bytes) -> task

    def bound_to(self, queue: AsyncQueue) -> Dispatcher:
        return Dispatcher(self.app, self.queue_name, queue)

    def _own_queue(self) -> AsyncQueue:
        return self._queue or self.app.queue(self.queue_name)

    def _find(self, payload: bytes) -> tuple[Task[Any, Any] | None, bytes | memoryview, str]:
        """The task an envelope names and its arguments' bytes; the common case is one
        prefix check and one dict look-up (bench/typed_tasks.py)."""
        prefix = self._prefix
        if payload.startswith(prefix):
            at = len(prefix)
            end = payload.find(b"\n", at, 512)
            if len(self._heads) != len(self.app.tasks):
                self._heads = {name.encode(): t for name, t in self.app.tasks.items()}
            task = self._heads.get(payload[at:end]) if end > 0 else None
            if task is not None:
                return task, payload[end + 1:], ""
        name, body, mode = open_envelope(payload, self._format)  # raises the typed refusal
        if name == BATCH_TASK and not mode:
            return None, body, "batch"  # a batch's own job (echomq.tasks.workflows)
        found: Task[Any, Any] | None = self.app.tasks.get(name)
        if found is None:
            raise UnknownTask(f"no task {name!r} in this app; "
                              f"it has {', '.join(sorted(self.app.tasks)) or 'none'}")
        if mode not in STEP_MODES:
            raise UnreadablePayload(f"job of task {name}: unknown canvas mode {mode!r}")
        return found, body, mode

    async def __call__(self, lease: Lease) -> Outcome:
        task, body, mode = self._find(lease.payload)
        if task is None:
            return Ack(result=await run_batch(self.app, self._own_queue(), lease.id, body))
        name = task.name
        try:
            if mode:  # a canvas step: its children's results first
                values = await step_values(task, self._own_queue(), mode, body)
            else:
                values = task.decode_values(body)
        except (ValueError, TypeError) as exc:  # msgspec's DecodeError is a ValueError
            raise UnreadablePayload(
                f"the arguments of job {lease.id} do not fit task {name}: {exc}") from None
        ctx: Any = None
        if task.sig.context_name is not None:
            ctx = TaskContext(lease, self._own_queue(), name, asyncio.get_running_loop())
        try:
            if task.is_async:
                value = await task.sig.call(values, ctx)
            else:
                value = await asyncio.get_running_loop().run_in_executor(
                    self.app.threads(), task.sig.call, values, ctx)
        except Exception as exc:
            outcome = task.failed(exc, lease.attempt)
            if outcome is None or shape_failure(exc, outcome):
                raise  # the consumer's path: logged, on_failure hooks, the outcome shaped
            log.warning("job %s (task %s, attempt %d) failed%s", lease.id, name, lease.attempt,
                        ": giving up" if outcome.give_up else "", exc_info=exc)
            return outcome
        if type(value) in _PASSED:
            return value  # type: ignore[no-any-return]
        return Ack(result=task.encode_result(value))
