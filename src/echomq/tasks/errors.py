"""The typed tasks' own errors, under :class:`~echomq.core.errors.EchoMQError`::

    EchoMQError
    └── TaskError               a worker could not run a job as a typed task (a failed
        │                       attempt: the job runs again, dead after its attempts)
        ├── UnknownTask         the payload names a task this app does not have
        └── UnreadablePayload   the payload is not an envelope this app can read (another
                                format or envelope version, or arguments that do not fit
                                the task's signature)

Neither is raised to a caller of ``admit``: arguments are checked there before any I/O
(:class:`~echomq.core.errors.InvalidArgument`). A worker meets them, records them as the
attempt's error (type, message, traceback in the row) and goes on with the next job.
"""

from __future__ import annotations

from echomq.core.errors import EchoMQError

__all__ = ["TaskError", "UnknownTask", "UnreadablePayload"]


class TaskError(EchoMQError):
    """A job a worker could not run as a typed task; the attempt failed, the worker lives."""


class UnknownTask(TaskError):
    """The payload names a task this app does not register (a deploy not yet rolled out,
    or a job meant for another app's queue)."""


class UnreadablePayload(TaskError):
    """The payload is not a typed-task envelope this app reads: no envelope, another
    envelope version or format, or arguments that do not decode to the task's parameters."""
