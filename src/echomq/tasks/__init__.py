"""Typed tasks: decorated functions over the queue (``echomq.App``, ``@app.task``).

The layer above the runtime and below the operator tools: it imports the client, the
runtime and the protocol, never ``echomq.ops``. Its names are also the facade's
(``echomq.App``, ``echomq.TaskContext``, ...). Guide: docs/coming-from.md; design and
figures: docs/decisions/0033-typed-tasks.md.
"""

from echomq.tasks.app import App
from echomq.tasks.canvas import Chain, Chord, Group, Signature, Workflow, chain, chord, group
from echomq.tasks.context import TaskContext
from echomq.tasks.errors import TaskError, UnknownTask, UnreadablePayload
from echomq.tasks.handle import SyncTaskHandle, TaskHandle
from echomq.tasks.serializer import ENVELOPE_VERSION, MsgspecSerializer, Serializer
from echomq.tasks.task import AdmitOptions, Task, TaskCall
from echomq.tasks.workflows import (
    BatchHandle,
    BatchStatus,
    GroupHandle,
    SyncBatchHandle,
    SyncGroupHandle,
)

__all__ = [
    "ENVELOPE_VERSION",
    "AdmitOptions",
    "App",
    "BatchHandle",
    "BatchStatus",
    "Chain",
    "Chord",
    "Group",
    "GroupHandle",
    "MsgspecSerializer",
    "Serializer",
    "Signature",
    "SyncBatchHandle",
    "SyncGroupHandle",
    "SyncTaskHandle",
    "Task",
    "TaskCall",
    "TaskContext",
    "TaskError",
    "TaskHandle",
    "UnknownTask",
    "UnreadablePayload",
    "Workflow",
    "chain",
    "chord",
    "group",
]
