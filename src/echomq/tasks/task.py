"""A typed task: a function, the options its jobs are admitted with, and its admission.

``@app.task(...)`` makes one (:meth:`echomq.tasks.app.App.task`). Calling the task runs
the function here (as a plain call); ``await task.admit(...)`` admits a job that a worker
runs (:class:`~echomq.tasks.handle.TaskHandle`); ``task.admit_sync(...)`` is the
blocking twin; ``task.options(delay_ms=..., priority=...)`` a copy with other options
for one call; ``await task.admit_many([...])`` many at once on the queue's batch path,
one handle (or typed error) per item in input order. Every argument is bound and checked
before any I/O (:mod:`echomq.tasks.signature`); the options and the other declarations
are checked in :mod:`echomq.tasks.options` (their names are this module's too).

Options: ``queue``; ``lane`` (a parameter's name or a function of the arguments: the
job's lane; None for none); ``serial``; ``priority`` 0..3; ``max_attempts``; ``backoff``
(a :class:`~echomq.core.outcomes.BackoffPolicy` for this task's failures);
``timeout_ms``; ``delay_ms``; ``expires_ms`` (a deadline to start by: past it the job ends
``expired`` unrun, docs/decisions/0045-expiry.md); ``key`` (a parameter's name or a function of the arguments
giving a business key: the job gets a fresh time-ordered id and the key, as
``derive_id("JOB", key, namespace=task name)``, is its dedupe key for ``dedupe_ms``
(default :data:`KEY_WINDOW_MS`, one hour from admission; ``dedupe_mode`` "throttle" or
"debounce", :mod:`echomq.protocol.dedupe`), so the same key admitted again in the window
answers DUPLICATE with the first job's handle, and keyed jobs keep the order of admission
(docs/decisions/0043); a key of None admits without a window);
``retry_on`` (exception types that retry; any other exception ends the job dead at once)
and ``give_up_on`` (exception types that end it dead at once); ``name`` (default
``module.qualname``, what travels with the job; a script's functions are named after the
script's module, not ``__main__``).
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, Generic, ParamSpec, TypeVar

from echomq.core.errors import EchoMQError, InvalidArgument
from echomq.core.failures import failure_text
from echomq.core.ids import derive_id, generate
from echomq.core.model import Verdict
from echomq.core.outcomes import Backoff, BackoffPolicy
from echomq.protocol import Window, check_lane, check_window
from echomq.protocol.flows import StepOptions
from echomq.tasks.canvas import Signature
from echomq.tasks.context import TaskContext
from echomq.tasks.handle import SyncTaskHandle, TaskHandle
from echomq.tasks.host import Host
from echomq.tasks.options import (
    KEY_WINDOW_MS,
    AdmitOptions,
    ArgFn,
    ArgOf,
    TaskCall,
    arg_of,
    check_name,
    exception_types,
    module_of,
)
from echomq.tasks.serializer import envelope_head
from echomq.tasks.signature import TaskSignature

__all__ = ["KEY_WINDOW_MS", "AdmitOptions", "Task", "TaskCall"]

P = ParamSpec("P")
R = TypeVar("R")


class Task(Generic[P, R]):
    """One typed task of an :class:`~echomq.tasks.app.App` (see the module)."""

    def __init__(self, app: Host, fn: Callable[..., Any], *, name: str | None, queue: str,
                 options: AdmitOptions, backoff: BackoffPolicy | None = None,
                 retry_on: Any = None, give_up_on: Any = None) -> None:
        if not callable(fn):
            raise InvalidArgument(f"a task is a function, not {fn!r}")
        self.app, self.fn = app, fn
        self.name = check_name(name or f"{module_of(fn)}.{fn.__qualname__}")
        self.queue = queue
        self.is_async = inspect.iscoroutinefunction(fn)
        if backoff is not None and not isinstance(backoff, BackoffPolicy):
            raise InvalidArgument(f"backoff must be a BackoffPolicy, not {type(backoff).__name__}")
        self.backoff = backoff
        self.retry_on = exception_types("retry_on", retry_on)
        self.give_up_on = exception_types("give_up_on", give_up_on)
        self.sig = TaskSignature(fn, context_type=TaskContext, serializer=app.serializer, who=self.name)
        self._head = envelope_head(app.serializer, self.name)
        self._encode = self.encode_result = app.serializer.encode
        self.decode_args = app.serializer.decoder(self.sig.args_type)
        self._serializer = app.serializer
        self.decode_result = app.serializer.decoder(self.sig.returns)
        self._opts = options
        self._lane = self._arg_fn("lane", options.lane)
        self._key = self._arg_fn("key", options.key)
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def _arg_fn(self, what: str, value: ArgFn) -> ArgOf | None:
        return arg_of(self.name, self.sig.names, what, value)

    # ------------------------------------------------------------ plain calls
    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Any:
        """Run the function here, now (no queue): as calling it undecorated."""
        return self.fn(*args, **kwargs)

    def options(self, **overrides: Any) -> Task[P, R]:
        """This task with other admission options (``delay_ms``, ``priority``, ``lane``,
        ``serial``, ``max_attempts``, ``timeout_ms``, ``expires_ms``, ``key``) for the calls
        made on it."""
        unknown = set(overrides) - set(AdmitOptions.__dataclass_fields__)
        if unknown:
            raise InvalidArgument(f"task {self.name}: no option {', '.join(sorted(unknown))}")
        other = copy.copy(self)
        other._opts = replace(self._opts, **overrides)
        other._lane = other._arg_fn("lane", other._opts.lane)
        other._key = other._arg_fn("key", other._opts.key)
        return other

    def step_options(self, args: tuple[Any, ...], kwargs: dict[str, Any],
                     rest: list[Any] | None = None) -> tuple[StepOptions, int | None]:
        """(options, expires_ms) of one call as a workflow step's (decision 0041); a step fed
        results passes ``rest`` (its values after the first) and its lane sees None first."""
        o, values = self._opts, self.sig.bind(args, kwargs) if rest is None else [None, *rest]
        lane = self._lane and check_lane(self._lane(args if rest is None else (None, *args),
                                                    kwargs, values))
        return StepOptions(lane=lane or "", delay_ms=o.delay_ms, serial=o.serial,
                           max_attempts=o.max_attempts, priority=o.priority,
                           timeout_ms=o.timeout_ms), o.expires_ms

    def s(self, *args: Any, **kwargs: Any) -> Signature[R]:
        """A signature (:mod:`echomq.tasks.canvas`): in a chain or chord, the previous
        step's result comes first, then these arguments (checked when admitted)."""
        return Signature(self, args, kwargs)

    def si(self, *args: Any, **kwargs: Any) -> Signature[R]:
        """An immutable signature: these arguments only, whatever came before."""
        return Signature(self, args, kwargs, immutable=True)

    def call(self, *args: P.args, **kwargs: P.kwargs) -> TaskCall:
        """This call's arguments, checked now (an item of ``admit_many``)."""
        self.sig.bind(args, kwargs)
        return TaskCall(args, kwargs)

    # ------------------------------------------------------------ admission
    def prepare(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, bytes, str | None]:
        """``(job id, payload, lane)`` of one call; InvalidArgument before any I/O. A keyed
        call's id here is its derived key (``derive_id("JOB", key, namespace=name)``): the
        id a flow step (canvas) admits it under, refused while its row exists; ``admit``
        gives it a fresh id and the key as its dedupe key instead (docs/decisions/0043)."""
        job_id, payload, lane, window = self._prepare(args, kwargs)
        return (job_id if window is None or window.key is None else window.key), payload, lane

    def _prepare(self, args: tuple[Any, ...], kwargs: dict[str, Any]
                 ) -> tuple[str, bytes, str | None, Window | None]:
        """``(job id, payload, lane, dedupe window)`` of one call: a keyed call's window is
        on its derived key, its id a fresh one (docs/decisions/0043)."""
        values = self.sig.bind(args, kwargs)
        key = self._key
        business = None if key is None else key(args, kwargs, values)
        job_id, window = generate("JOB"), None
        if business is not None:
            o = self._opts
            window = check_window(KEY_WINDOW_MS if o.dedupe_ms is None else o.dedupe_ms,
                                  derive_id("JOB", business, namespace=self.name), o.dedupe_mode)
        try:
            payload = self._head + self._encode(values)
        except (TypeError, ValueError) as exc:
            raise InvalidArgument(f"task {self.name}: arguments cannot be encoded: {exc}") from None
        lane = None if self._lane is None else check_lane(self._lane(args, kwargs, values)) or None
        return job_id, payload, lane, window

    def _admit_kwargs(self) -> dict[str, Any]:
        o = self._opts
        return {"delay_ms": o.delay_ms, "serial": o.serial, "max_attempts": o.max_attempts,
                "priority": o.priority, "timeout_ms": o.timeout_ms, "expires_ms": o.expires_ms}

    async def admit(self, *args: P.args, **kwargs: P.kwargs) -> TaskHandle[R]:
        """Admit one job of this task; its handle (``.id``, ``.verdict``, ``await .result()``).
        A keyed call refused in its window gets the handle of the job that holds the key."""
        job_id, payload, lane, window = self._prepare(args, kwargs)
        queue = self.app.queue(self.queue)
        if window is None:
            verdict = await queue.admit(job_id, payload, lane=lane, **self._admit_kwargs())
        else:
            verdict, job_id = await queue.admission.admit_held(job_id, payload, window, lane=lane,
                                                                **self._admit_kwargs())
        return TaskHandle(queue, job_id, verdict, self.name, self.decode_result)

    def admit_sync(self, *args: P.args, **kwargs: P.kwargs) -> SyncTaskHandle[R]:
        """:meth:`admit`, blocking (sync code: a Django view, a script); the handle's
        ``result()`` blocks too."""
        job_id, payload, lane, window = self._prepare(args, kwargs)
        queue = self.app.sync_queue(self.queue)
        if window is None:
            verdict = queue.admit(job_id, payload, lane=lane, **self._admit_kwargs())
        else:
            verdict, job_id = queue.admission.admit_held(job_id, payload, window, lane=lane,
                                                         **self._admit_kwargs())
        return SyncTaskHandle(queue, job_id, verdict, self.name, self.decode_result)

    def handle(self, job_id: str) -> TaskHandle[R]:
        """The handle of a job of this task admitted earlier (by id; its verdict None)."""
        return TaskHandle(self.app.queue(self.queue), job_id, None, self.name, self.decode_result)

    def handle_sync(self, job_id: str) -> SyncTaskHandle[R]:
        """:meth:`handle`, blocking."""
        return SyncTaskHandle(self.app.sync_queue(self.queue), job_id, None, self.name, self.decode_result)

    def _items(self, calls: Iterable[TaskCall | tuple[Any, ...]]
               ) -> list[tuple[str, bytes, str | None, Window | None]]:
        items = []
        for i, call in enumerate(calls):
            if isinstance(call, TaskCall):
                args, kwargs = call.args, call.kwargs
            elif isinstance(call, tuple):
                args, kwargs = call, {}
            else:
                raise InvalidArgument(f"item {i}: a TaskCall (task.call(...)) or a tuple of arguments")
            try:
                items.append(self._prepare(args, kwargs))
            except InvalidArgument as exc:
                raise InvalidArgument(f"item {i}: {exc}") from None
        return items

    async def admit_many(self, calls: Iterable[TaskCall | tuple[Any, ...]]
                         ) -> list[TaskHandle[R] | EchoMQError]:
        """Admit many jobs of this task (each item ``task.call(...)`` or a tuple of
        positional arguments) on the queue's batch path: one handle per item, in input
        order (or the typed error the server answered for that item). Every item is
        checked first: one that does not fit raises InvalidArgument, nothing written.
        A keyed task's items are admitted one call each, in order (each has its own
        dedupe key; a refused one gets the holder's handle)."""
        items = self._items(calls)
        queue = self.app.queue(self.queue)
        o = self._opts
        out: list[TaskHandle[R] | EchoMQError] = []
        if self._key is not None:
            for job_id, payload, lane, window in items:
                try:
                    if window is None:
                        verdict = await queue.admit(job_id, payload, lane=lane, **self._admit_kwargs())
                    else:
                        verdict, job_id = await queue.admission.admit_held(
                            job_id, payload, window, lane=lane, **self._admit_kwargs())
                except EchoMQError as exc:
                    out.append(exc)
                    continue
                out.append(TaskHandle(queue, job_id, verdict, self.name, self.decode_result))
            return out
        verdicts = await queue.admit_many([i[:3] for i in items], serial=o.serial,
                                          priority=o.priority, timeout_ms=o.timeout_ms,
                                          delay_ms=o.delay_ms, max_attempts=o.max_attempts,
                                          expires_ms=o.expires_ms)
        return [v if not isinstance(v, Verdict) else
                TaskHandle(queue, item[0], v, self.name, self.decode_result)
                for item, v in zip(items, verdicts, strict=True)]

    def admit_many_sync(self, calls: Iterable[TaskCall | tuple[Any, ...]]
                        ) -> list[SyncTaskHandle[R] | EchoMQError]:
        """:meth:`admit_many`, blocking."""
        items = self._items(calls)
        queue = self.app.sync_queue(self.queue)
        o = self._opts
        out: list[SyncTaskHandle[R] | EchoMQError] = []
        if self._key is not None:
            for job_id, payload, lane, window in items:
                try:
                    if window is None:
                        verdict = queue.admit(job_id, payload, lane=lane, **self._admit_kwargs())
                    else:
                        verdict, job_id = queue.admission.admit_held(
                            job_id, payload, window, lane=lane, **self._admit_kwargs())
                except EchoMQError as exc:
                    out.append(exc)
                    continue
                out.append(SyncTaskHandle(queue, job_id, verdict, self.name, self.decode_result))
            return out
        verdicts = queue.admit_many([i[:3] for i in items], serial=o.serial, priority=o.priority,
                                    timeout_ms=o.timeout_ms, delay_ms=o.delay_ms,
                                    max_attempts=o.max_attempts, expires_ms=o.expires_ms)
        return [v if not isinstance(v, Verdict) else
                SyncTaskHandle(queue, item[0], v, self.name, self.decode_result)
                for item, v in zip(items, verdicts, strict=True)]

    # ------------------------------------------------------------ the worker
    def decode_values(self, body: bytes | memoryview) -> Any:
        """The arguments of a job, decoded to the parameters' types. An array shorter than
        the parameters (admitted before the task gained some) is read when every missing
        parameter has a default; otherwise the decoder's error is raised."""
        try:
            return self.decode_args(body)
        except (ValueError, TypeError):
            sig, ser = self.sig, self._serializer
            try:
                given = len(ser.decoder(list[Any])(body))
            except (ValueError, TypeError):
                given = sig.n
            empty = inspect.Parameter.empty
            if given >= sig.n or any(d is empty for d in sig.defaults[given:]):
                raise
            shorter: Any = tuple.__class_getitem__(tuple(sig.types[:given])) if given else tuple[()]
            head = ser.decoder(shorter)(body)
            return (*head, *sig.defaults[given:])

    def failed(self, exc: Exception, attempt: int) -> Backoff | None:
        """The outcome of an attempt that raised ``exc``, by this task's retry policy; None
        when the consumer's own path decides (retry with its backoff, dead at the limit)."""
        if (self.give_up_on and isinstance(exc, self.give_up_on)) or (
                self.retry_on and not isinstance(exc, self.retry_on)):
            return Backoff(error=failure_text(exc), give_up=True)
        if self.backoff is not None:
            return Backoff(error=failure_text(exc), delay_ms=self.backoff.delay_ms(attempt))
        return None

    def __repr__(self) -> str:
        return f"<Task {self.name} on {self.queue}>"
