"""Admitting workflows and batches of typed tasks, and running their steps at the worker.

``await app.admit(workflow)`` (:mod:`echomq.tasks.canvas`) admits the workflow's flow and
returns the :class:`~echomq.tasks.handle.TaskHandle` of its last step (a lone group: a
:class:`GroupHandle` over its members' handles, admitted one by one).

A **batch** (``await app.batch(jobs, on_success=..., on_complete=..., on_death=...)``) is
a flow too: its root is a job of the reserved task ``echomq.batch`` whose children are the
jobs, with the ``continue`` policy (a dead job is counted, the rest go on). When every job
has ended the batch's job runs at a worker: it reads its row's counts and admits the
callbacks that apply: ``on_complete`` always, ``on_success`` when no job failed,
``on_death`` when at least one died or was cancelled (once, after all ended; Sidekiq's
death callback fires at the first death). Each callback's id is derived from the batch's
id and its kind, so a batch job that runs twice (a worker lost mid-way) admits each
callback once (the second admission is a DUPLICATE). A mutable callback (``.s``) gets the
:class:`BatchStatus` as its first argument; ``.si`` gets none. ``handle.progress()``
reads the batch's counts at any time; ``handle.result()`` waits for its end;
``handle.cancel()`` cancels its jobs and its callbacks.
The batch's job runs on the queue of its first callback (else of its first job): a queue
the app's worker runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from echomq.client._async.queue import AsyncQueue
from echomq.client._sync.queue import Queue
from echomq.core.errors import InvalidArgument
from echomq.core.ids import derive_id, generate
from echomq.core.model import Verdict
from echomq.protocol import decoders as d
from echomq.protocol import flows as f
from echomq.protocol import row as row_call
from echomq.protocol.flows import FlowSpec
from echomq.protocol.keyspace import QueueKeys
from echomq.tasks.canvas import Chain, Group, Signature, Workflow, build
from echomq.tasks.errors import UnknownTask, UnreadablePayload
from echomq.tasks.handle import SyncTaskHandle, TaskHandle
from echomq.tasks.host import Host
from echomq.tasks.serializer import envelope_head

if TYPE_CHECKING:
    from echomq.tasks.task import Task

__all__ = ["BATCH_TASK", "STEP_MODES", "BatchHandle", "BatchStatus", "GroupHandle",
           "SyncBatchHandle", "SyncGroupHandle", "run_batch", "step_values"]

BATCH_TASK = "echomq.batch"
STEP_MODES = ("", "r1", "rn")
_KINDS = ("success", "complete", "death")


@dataclass(frozen=True, slots=True)
class BatchStatus:
    """A batch's counts: ``total`` jobs, ``done`` ended with a result, ``failed`` ended dead
    or cancelled; ``state`` the batch's own job ('waiting' while jobs run, then 'pending',
    'active', 'done')."""

    id: str
    total: int
    done: int
    failed: int
    state: str = ""

    @property
    def pending(self) -> int:
        """Jobs not ended yet."""
        return self.total - self.done - self.failed


def callback_id(batch_id: str, kind: str) -> str:
    """A batch's callback's id: derived, so a batch job run twice admits it once."""
    return derive_id("JOB", f"{batch_id}:{kind}", namespace=BATCH_TASK)


def _status(batch_id: str, row: dict[str, bytes] | None) -> BatchStatus:
    if row is None:
        raise InvalidArgument(f"no batch {batch_id} (never admitted, or trimmed)")
    total, settled, failed = (int(row.get(k, b"0") or 0) for k in ("children", "settled", "failed"))
    return BatchStatus(batch_id, total, settled - failed, failed, d.text(row.get("state", b"")))


# ------------------------------------------------------------------ admission (pure parts)
def _members(jobs: Any) -> list[Workflow]:
    items = list(jobs.members) if isinstance(jobs, Group) else list(jobs)
    if not items:
        raise InvalidArgument("a batch has at least one job")
    return items


def batch_spec(app: Host, jobs: Any, callbacks: dict[str, Signature[Any] | None]) -> FlowSpec:
    """The flow of a batch: its own job (root) over the jobs' flows; every argument checked."""
    children = tuple(build(job)[0] for job in _members(jobs))
    rows: list[list[Any]] = []
    for kind, sig in callbacks.items():
        if sig is None:
            continue
        if not isinstance(sig, Signature):
            raise InvalidArgument(f"on_{kind} is a signature (task.s(...) or task.si(...))")
        task = sig.task
        if sig.immutable:
            data = task.prepare(sig.args, sig.kwargs)[1]
        else:
            data = app.serializer.encode(task.sig.bind_rest(sig.args, sig.kwargs))
        rows.append([kind, task.name, task.queue, sig.immutable, data])
    queue = rows[0][2] if rows else children[0].queue
    payload = envelope_head(app.serializer, BATCH_TASK) + app.serializer.encode(rows)
    return FlowSpec(queue, generate("JOB"), payload, children, "continue")


def _lone(wf: Workflow) -> Signature[Any]:
    """The one signature of a workflow of one job (a signature, or a chain of one step)."""
    while isinstance(wf, Chain) and len(wf.steps) == 1:
        wf = wf.steps[0]
    assert isinstance(wf, Signature)  # build() gave a flow of one job: nothing else has none
    return wf


async def admit(app: Host, wf: Workflow) -> TaskHandle[Any] | GroupHandle:
    """``app.admit(workflow)``: see the module."""
    if isinstance(wf, Group):
        return GroupHandle([await admit(app, m) for m in wf.members])
    spec, task = build(wf)
    if not spec.children:  # a lone signature: the task's own admission (its options apply)
        sig = _lone(wf)
        one: TaskHandle[Any] = await task.admit(*sig.args, **sig.kwargs)
        return one
    queue = app.queue(spec.queue)
    fresh = await queue.flows.admit_tree(spec)
    return TaskHandle(queue, spec.id, Verdict.ENQUEUED if fresh else Verdict.DUPLICATE,
                      task.name, task.decode_result)


def admit_sync(app: Host, wf: Workflow) -> SyncTaskHandle[Any] | SyncGroupHandle:
    """``app.admit_sync(workflow)``, blocking."""
    if isinstance(wf, Group):
        return SyncGroupHandle([admit_sync(app, m) for m in wf.members])
    spec, task = build(wf)
    if not spec.children:
        sig = _lone(wf)
        one_sync: SyncTaskHandle[Any] = task.admit_sync(*sig.args, **sig.kwargs)
        return one_sync
    queue = app.sync_queue(spec.queue)
    fresh = queue.flows.admit_tree(spec)
    return SyncTaskHandle(queue, spec.id, Verdict.ENQUEUED if fresh else Verdict.DUPLICATE,
                          task.name, task.decode_result)


async def admit_batch(app: Host, jobs: Any, **callbacks: Signature[Any] | None) -> BatchHandle:
    spec = batch_spec(app, jobs, callbacks)
    queue = app.queue(spec.queue)
    await queue.flows.admit_tree(spec)
    return BatchHandle(queue, spec.id, app)


def admit_batch_sync(app: Host, jobs: Any, **callbacks: Signature[Any] | None) -> SyncBatchHandle:
    spec = batch_spec(app, jobs, callbacks)
    queue = app.sync_queue(spec.queue)
    queue.flows.admit_tree(spec)
    return SyncBatchHandle(queue, spec.id, app)


# ------------------------------------------------------------------ handles
class GroupHandle:
    """A lone group's members (asyncio): ``await result()`` is their results in order."""

    def __init__(self, handles: list[Any]) -> None:
        self.handles = handles

    async def result(self, *, timeout: float | None = 30.0) -> list[Any]:  # noqa: ASYNC109 (the API asks for timeout=)
        return [await h.result(timeout=timeout) for h in self.handles]


class SyncGroupHandle:
    """A lone group's members (blocking)."""

    def __init__(self, handles: list[Any]) -> None:
        self.handles = handles

    def result(self, *, timeout: float | None = 30.0) -> list[Any]:
        return [h.result(timeout=timeout) for h in self.handles]


class _Batch:
    """What both batch handles share: the batch's id, its status decoder, its callbacks' ids."""

    def __init__(self, batch_id: str, app: Host) -> None:
        self.id = batch_id
        self._decode = app.serializer.decoder(BatchStatus)

    def callback_id(self, kind: str) -> str:
        """The id of this batch's ``on_<kind>`` callback job ('success', 'complete' or
        'death'), once admitted (``task.handle(id)`` waits for it)."""
        if kind not in _KINDS:
            raise InvalidArgument(f"kind is one of {_KINDS}, not {kind!r}")
        return callback_id(self.id, kind)


class BatchHandle(_Batch):
    """An admitted batch (asyncio): ``progress()`` now, ``result()`` once its job ran."""

    def __init__(self, queue: AsyncQueue, batch_id: str, app: Host) -> None:
        super().__init__(batch_id, app)
        self.queue = queue

    async def progress(self) -> BatchStatus:
        return _status(self.id, await self.queue.job(self.id))

    async def result(self, *, timeout: float | None = 30.0) -> BatchStatus:  # noqa: ASYNC109 (the API asks for timeout=)
        status: BatchStatus = self._decode(await self.queue.result(self.id, timeout=timeout))
        return status

    async def cancel(self) -> bool:
        """Cancel the batch: its jobs not started end cancelled, running ones are asked to
        stop, and no callback runs (the flow's cancel). True if it had not ended yet."""
        return await self.queue.cancel_flow(self.id)


class SyncBatchHandle(_Batch):
    """An admitted batch (blocking)."""

    def __init__(self, queue: Queue, batch_id: str, app: Host) -> None:
        super().__init__(batch_id, app)
        self.queue = queue

    def progress(self) -> BatchStatus:
        return _status(self.id, self.queue.job(self.id))

    def result(self, *, timeout: float | None = 30.0) -> BatchStatus:
        status: BatchStatus = self._decode(self.queue.result(self.id, timeout=timeout))
        return status

    def cancel(self) -> bool:
        return self.queue.cancel_flow(self.id)


# ------------------------------------------------------------------ at the worker
async def step_values(task: Task[Any, Any], queue: AsyncQueue, mode: str, body: Any) -> tuple[Any, ...]:
    """The arguments of a canvas step: its children's results (one, or a list in order)
    decoded to its first parameter's type, then the rest of its arguments."""
    ser, types = task.app.serializer, task.sig.types
    members, *rest = ser.decoder(tuple[(list[str], *types[1:])])(body)  # type: ignore[misc]
    calls = [row_call(QueueKeys.of(q), i) for i, q in map(f.split_member, members)]
    results = []
    for who, reply in zip(members, await queue.connector.pipeline(calls), strict=True):
        row = d.decode_row(d._raise_if_error(reply))
        if row is None or row.get("result") is None:
            raise UnreadablePayload(f"step {who} kept no result (trimmed, or keep_done_ms=0)")
        results.append(row["result"])
    if mode == "r1":
        first = ser.decoder(types[0])(results[0])
    else:
        first = ser.check([ser.decoder(Any)(r) for r in results], types[0])
    return (first, *rest)


async def run_batch(app: Host, queue: AsyncQueue, batch_id: str, body: Any) -> bytes:
    """Run a batch's own job: admit the callbacks that apply (each once); its status is
    the job's result."""
    ser = app.serializer
    rows = ser.decoder(list[tuple[str, str, str, bool, bytes]])(body)
    status = _status(batch_id, await queue.job(batch_id))
    for kind, name, cq, immutable, data in rows:
        fire = {"complete": True, "success": status.failed == 0, "death": status.failed > 0}
        if not fire.get(kind, False):
            continue
        task = app.tasks.get(name)
        if task is None:
            raise UnknownTask(f"batch {batch_id}: no task {name!r} in this app for on_{kind}")
        payload = data if immutable else (
            envelope_head(ser, name) + ser.encode([status, *ser.decoder(list[Any])(data)]))
        await app.queue(cq).admit(callback_id(batch_id, kind), payload)
    return ser.encode(status)
