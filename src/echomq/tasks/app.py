"""A typed-task application: its tasks, its server, its schedules (:class:`App`).

::

    app = echomq.App(url="redis://127.0.0.1:6379")

    @app.task(queue="mail", max_attempts=5, retry_on=(ConnectionError,))
    async def send_email(to: str, subject: str) -> bool: ...

    handle = await send_email.admit("ada@example.org", "hello")
    sent = await handle.result(timeout=10)          # a bool, decoded

``echomq worker module:app`` runs every queue the app's tasks use (or ``--queue`` some),
with their schedules. The app keeps no state of its own outside the queue's keys: a task
is its function and its options; a job is an ordinary job whose payload is an envelope
(:mod:`echomq.tasks.serializer`).

Connections: ``App(url=...)`` opens an asyncio connector on first use in each event loop
(``await task.admit``) and one blocking connector (``task.admit_sync``), both closed by
``aclose``/``close``; ``App(connector=..., sync_connector=...)`` uses the caller's
(which the caller closes).
"""

from __future__ import annotations

import asyncio
import re
import weakref
from collections.abc import Callable, Coroutine, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, ParamSpec, Protocol, TypeVar, overload

from echomq.client._async.cluster import AsyncClusterConnector
from echomq.client._async.connect import connect_async
from echomq.client._async.connector import AsyncConnector
from echomq.client._async.queue import AsyncQueue
from echomq.client._sync.cluster import ClusterConnector
from echomq.client._sync.connect import connect
from echomq.client._sync.connector import Connector
from echomq.client._sync.queue import Queue
from echomq.core.errors import InvalidArgument
from echomq.core.model import QueueOptions
from echomq.core.outcomes import BackoffPolicy
from echomq.protocol import keyspace
from echomq.protocol.schedules import Schedule
from echomq.runtime.consumer_options import Handler
from echomq.tasks import workflows
from echomq.tasks.canvas import Group, Signature, Workflow
from echomq.tasks.dispatch import Dispatcher
from echomq.tasks.serializer import MsgspecSerializer, Serializer
from echomq.tasks.task import AdmitOptions, Task
from echomq.tasks.workflows import BatchHandle, SyncBatchHandle

__all__ = ["App"]

P = ParamSpec("P")
R = TypeVar("R")
AnyAsync = AsyncConnector | AsyncClusterConnector
AnySync = Connector | ClusterConnector
_SCHEDULE_NAME = re.compile(r"[^A-Za-z0-9_.\-]")


class Declare(Protocol):
    """``@app.task(...)``: takes the function, gives its :class:`Task` (result type: what
    an ``async def`` returns when awaited, or what a plain ``def`` returns)."""

    @overload
    def __call__(self, fn: Callable[P, Coroutine[Any, Any, R]], /) -> Task[P, R]: ...

    @overload
    def __call__(self, fn: Callable[P, R], /) -> Task[P, R]: ...


class App:
    """Typed tasks over one server (see the module). ``queue`` is the tasks' default queue."""

    def __init__(self, *, url: str | None = None, connector: AnyAsync | None = None,
                 sync_connector: AnySync | None = None, serializer: Serializer | None = None,
                 queue: str = "default", queue_options: QueueOptions | None = None,
                 threads: int = 32) -> None:
        if url is not None and not isinstance(url, str):
            raise InvalidArgument(f"url must be a str, not {type(url).__name__}")
        self.url = url
        self.serializer: Serializer = serializer if serializer is not None else MsgspecSerializer()
        if not isinstance(self.serializer, Serializer) or " " in self.serializer.format:
            raise InvalidArgument("serializer needs format (no spaces), encode, decoder and check")
        self.default_queue = keyspace.check_queue(queue) or queue
        self.queue_options = queue_options
        if type(threads) is not int or threads < 1:
            raise InvalidArgument("threads must be an int >= 1")
        self._threads_n = threads
        self._connector, self._sync_connector = connector, sync_connector
        self._own: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AnyAsync] = (
            weakref.WeakKeyDictionary())
        self._own_sync: AnySync | None = None
        self._queues: dict[tuple[int, str], AsyncQueue] = {}
        self._sync_queues: dict[str, Queue] = {}
        self._pool: ThreadPoolExecutor | None = None
        self.tasks: dict[str, Task[Any, Any]] = {}
        self.schedules: list[Schedule] = []

    # ------------------------------------------------------------ declaring
    @overload
    def task(self, fn: Callable[P, Coroutine[Any, Any, R]], /) -> Task[P, R]: ...

    @overload
    def task(self, fn: Callable[P, R], /) -> Task[P, R]: ...

    @overload
    def task(self, fn: None = None, /, *, queue: str | None = None, lane: Any = None,
             serial: bool = False, priority: int = 0, max_attempts: int | None = None,
             backoff: BackoffPolicy | None = None, timeout_ms: int | None = None,
             delay_ms: int = 0, key: Any = None, name: str | None = None, retry_on: Any = None,
             give_up_on: Any = None, schedule: Schedule | None = None,
             dedupe_ms: int | None = None, dedupe_mode: str | None = None,
             expires_ms: int | None = None,
             ) -> Declare: ...

    def task(self, fn: Callable[..., Any] | None = None, /, *, queue: str | None = None,
             lane: Any = None, serial: bool = False, priority: int = 0,
             max_attempts: int | None = None, backoff: BackoffPolicy | None = None,
             timeout_ms: int | None = None, delay_ms: int = 0, key: Any = None,
             name: str | None = None, retry_on: Any = None, give_up_on: Any = None,
             schedule: Schedule | None = None, dedupe_ms: int | None = None,
             dedupe_mode: str | None = None, expires_ms: int | None = None) -> Any:
        """Declare a task (``@app.task`` or ``@app.task(...)``; options in
        :mod:`echomq.tasks.task`). ``schedule``: admit it at every tick of that
        :class:`~echomq.protocol.schedules.Schedule` (no arguments; ``app.schedule`` for some)."""
        opts = AdmitOptions(lane=lane, serial=serial, priority=priority, max_attempts=max_attempts,
                            timeout_ms=timeout_ms, delay_ms=delay_ms, key=key,
                            dedupe_ms=dedupe_ms, dedupe_mode=dedupe_mode,
                            expires_ms=expires_ms)
        where = keyspace.check_queue(queue) or queue if queue is not None else self.default_queue

        def declare(f: Callable[..., Any]) -> Task[Any, Any]:
            made: Task[Any, Any] = Task(self, f, name=name, queue=where, options=opts, backoff=backoff,
                                        retry_on=retry_on, give_up_on=give_up_on)
            if made.name in self.tasks:
                raise InvalidArgument(f"task {made.name!r} declared twice (give one a name=)")
            if schedule is not None:
                self._bind(made, schedule, (), {})
            self.tasks[made.name] = made
            return made

        return declare if fn is None else declare(fn)

    def schedule(self, task: Task[P, Any], schedule: Schedule, /, *args: P.args,
                 **kwargs: P.kwargs) -> Schedule:
        """Admit ``task(*args, **kwargs)`` at every tick of ``schedule`` (exactly once per
        tick however many workers run it: :class:`~echomq.AsyncScheduler`). Returns the
        schedule as the worker runs it (its queue, name and payload filled in)."""
        if not isinstance(task, Task) or task.name not in self.tasks or task.app is not self:
            raise InvalidArgument("schedule a task of this app")
        return self._bind(task, schedule, args, kwargs)

    def _bind(self, task: Task[Any, Any], schedule: Schedule, args: tuple[Any, ...],
              kwargs: dict[str, Any]) -> Schedule:
        if not isinstance(schedule, Schedule):
            raise InvalidArgument(f"schedule must be an echomq.Schedule, not {type(schedule).__name__}")
        if schedule.queue and schedule.queue != task.queue:
            raise InvalidArgument(f"schedule {schedule.name!r} names queue {schedule.queue!r}; "
                                  f"task {task.name} runs on {task.queue!r}")
        _, payload, lane = task.prepare(args, kwargs)  # checked now: a wrong argument fails here
        o = task._opts
        bound = replace(schedule, name=schedule.name or _SCHEDULE_NAME.sub("_", task.name)[-100:],
                        queue=task.queue, payload=payload, lane=lane, max_attempts=o.max_attempts,
                        timeout_ms=o.timeout_ms, priority=o.priority)
        if any((s.queue, s.name) == (bound.queue, bound.name) for s in self.schedules):
            raise InvalidArgument(f"schedule {bound.name!r} given twice (give one a name=)")
        self.schedules.append(bound)
        return bound

    def queues(self) -> list[str]:
        """Every queue the app's tasks use, sorted."""
        return sorted({t.queue for t in self.tasks.values()})

    def handler(self, queue: str) -> Handler:
        """The handler that runs this app's tasks on ``queue`` (for a Consumer of your own)."""
        return Dispatcher(self, queue)

    def handlers(self, queues: Iterable[str] | None = None) -> dict[str, Handler]:
        """One handler per queue: every queue of the app's tasks, or ``queues`` (each must
        be one of them)."""
        mine = self.queues()
        chosen = mine if not queues else list(dict.fromkeys(queues))
        unknown = [q for q in chosen if q not in mine]
        if unknown:
            raise InvalidArgument(f"no task of this app runs on {', '.join(unknown)} "
                                  f"(its queues: {', '.join(mine) or 'none'})")
        if not chosen:
            raise InvalidArgument("this app declares no task")
        return {q: self.handler(q) for q in chosen}

    # ------------------------------------------------------------ workflows
    async def admit(self, workflow: Workflow) -> Any:
        """Admit a workflow (``task.s(...)``, ``chain``, ``group``, ``chord``:
        :mod:`echomq.tasks.canvas`) as one flow: a handle whose ``result()`` is the last
        step's result (a lone group's: its members' results in order)."""
        return await workflows.admit(self, workflow)

    def admit_sync(self, workflow: Workflow) -> Any:
        """:meth:`admit`, blocking."""
        return workflows.admit_sync(self, workflow)

    async def batch(self, jobs: Iterable[Workflow] | Group, *,
                    on_success: Signature[Any] | None = None,
                    on_complete: Signature[Any] | None = None,
                    on_death: Signature[Any] | None = None) -> BatchHandle:
        """Admit ``jobs`` as one batch with its callbacks (:mod:`echomq.tasks.workflows`):
        ``progress()`` reads its counts, ``result()`` its :class:`BatchStatus` at the end."""
        return await workflows.admit_batch(self, jobs, success=on_success, complete=on_complete,
                                           death=on_death)

    def batch_sync(self, jobs: Iterable[Workflow] | Group, *,
                   on_success: Signature[Any] | None = None,
                   on_complete: Signature[Any] | None = None,
                   on_death: Signature[Any] | None = None) -> SyncBatchHandle:
        """:meth:`batch`, blocking."""
        return workflows.admit_batch_sync(self, jobs, success=on_success, complete=on_complete,
                                          death=on_death)

    # ------------------------------------------------------------ connections
    def connector(self) -> AnyAsync:
        """The asyncio connector: the one given, or this event loop's own (from ``url``)."""
        if self._connector is not None:
            return self._connector
        loop = asyncio.get_running_loop()
        own = self._own.get(loop)
        if own is None:
            own = self._own[loop] = connect_async(self._need_url())
        return own

    def sync_connector(self) -> AnySync:
        if self._sync_connector is not None:
            return self._sync_connector
        if self._own_sync is None:
            self._own_sync = connect(self._need_url())
        return self._own_sync

    def _need_url(self) -> str:
        if self.url is None:
            raise InvalidArgument("this App has no url (give url= or connector=/sync_connector=)")
        return self.url

    def queue(self, name: str) -> AsyncQueue:
        conn = self.connector()
        key = (id(conn), name)
        q = self._queues.get(key)
        if q is None or q.connector is not conn:
            q = self._queues[key] = AsyncQueue(conn, name, options=self.queue_options)
        return q

    def sync_queue(self, name: str) -> Queue:
        q = self._sync_queues.get(name)
        if q is None:
            q = self._sync_queues[name] = Queue(self.sync_connector(), name, options=self.queue_options)
        return q

    def threads(self) -> ThreadPoolExecutor:
        """The pool plain-``def`` tasks run in (``threads`` workers, made on first use)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self._threads_n, thread_name_prefix="echomq-task")
        return self._pool

    async def aclose(self) -> None:
        """Close the connectors this app opened (not the ones it was given) and its pool."""
        loop = asyncio.get_running_loop()
        own = self._own.pop(loop, None)
        if own is not None:
            await own.aclose()
        self._queues = {k: q for k, q in self._queues.items() if q.connector is not own}
        self.close()

    def close(self) -> None:
        if self._own_sync is not None:
            self._own_sync.close()
            self._own_sync = None
            self._sync_queues.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None

    def __repr__(self) -> str:
        return f"<App {len(self.tasks)} tasks on {', '.join(self.queues()) or 'no queue'}>"
