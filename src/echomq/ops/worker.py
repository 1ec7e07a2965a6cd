"""A worker process without writing process code: ``echomq worker module:handler -q Q``,
or ``echomq worker module:app`` for a typed-task :class:`~echomq.tasks.app.App`.

After arq's ``Worker``/``WorkerSettings``, ``rq worker`` and dramatiq's CLI:

* :class:`WorkerSettings` names everything a worker runs: one handler per queue, the
  server, concurrency, lease and beat, grace period, burst mode, a metrics port, and
  startup/shutdown hooks. ``echomq worker pkg.mod:WorkerSettings`` takes one (an
  instance, or an arq-style class whose attributes are the fields).
* :class:`Worker` runs one :class:`~echomq.runtime.consumer.Consumer` per queue (a
  :class:`~echomq.runtime.sharded_consumer.ShardedConsumer` for a sharded queue, found by
  its record: one queue, its shards sharing the concurrency), registers on
  each queue with a heartbeat (:mod:`echomq.client.registry`), and logs every failing
  handler with its traceback (the row keeps type, message and a bounded traceback).
* Shutdown (:func:`run_worker` maps SIGTERM and SIGINT to it): stop claiming, let
  running handlers finish within ``grace_s``, hand the rest back at once (pending
  again, fenced by the attempt, no failure counted), deregister, exit 0. A second
  signal ends the grace period at once.
* ``burst=True``: stop once the queues have nothing pending and nothing runs here
  (jobs scheduled for later are left for a later worker, as ``rq worker --burst``).
* ``schedules=[Schedule(...)]``: the worker also admits periodic jobs
  (:mod:`echomq.protocol.schedules`), each tick once however many workers run them.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from echomq.client._async.cluster import AsyncClusterConnector
from echomq.client._async.connect import connect_async
from echomq.client._async.connector import AsyncConnector
from echomq.client._async.queue import AsyncQueue
from echomq.client._async.scheduler import AsyncScheduler
from echomq.client._async.sharded import AsyncShardedQueue
from echomq.client.logical import shard_count
from echomq.client.registry import MinuteCounts, Registration, worker_name
from echomq.core.errors import InvalidArgument
from echomq.core.eviction import check_eviction_policy
from echomq.core.hooks import Hooks
from echomq.core.model import Lease, QueueOptions
from echomq.core.outcomes import Backoff, Defer, Outcome
from echomq.protocol import keyspace
from echomq.protocol.schedules import Schedule
from echomq.runtime.consumer import Consumer, ConsumerOptions, Handler
from echomq.runtime.process_pool import handler_path, resolve_handler
from echomq.runtime.sharded_consumer import ShardedConsumer
from echomq.servers.server import server_url_from_env
from echomq.tasks.app import App

__all__ = ["Worker", "WorkerReport", "WorkerSettings", "load_target", "run_worker"]

log = logging.getLogger("echomq.ops.worker")

Hook = Callable[[], Awaitable[None]]
_NO_CONNECTOR: Any = None  # a scheduler built only to check its schedules


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerSettings:
    """Everything one worker process runs. ``handlers`` maps queue name to handler."""

    handlers: Mapping[str, Handler | str]  # a str: a "package.module:function" path
    url: str | None = None  # None: ECHOMQ_URL
    concurrency: int = 32  # per queue
    burst: bool = False
    grace_s: float = 10.0
    beat_ms: int = 100
    lease_ms: int = 10_000
    queue_options: QueueOptions | None = None
    registry_beat_s: float = 2.0
    registry_ttl_s: float = 10.0
    metrics_port: int | None = None  # a Prometheus endpoint on 127.0.0.1 (0: any free port)
    metrics_host: str = "127.0.0.1"
    tracing: bool = False  # OpenTelemetry spans per job (the tracing extra; echomq.runtime.tracing)
    tracer_provider: Any = None  # None: the global provider
    on_startup: Hook | None = None
    on_shutdown: Hook | None = None
    allow_eviction: bool = False  # run even if the server's maxmemory-policy could evict jobs
    timeout_ms: int | None = None  # a handler running longer fails its attempt (HandlerTimeout)
    # "process": each blocking handler's attempt runs in a child process, killed at its
    # timeout (echomq.runtime.process_pool, decision 0035); "thread": in a worker thread.
    pool: str = "thread"
    hooks: Hooks | None = None  # before/after/on_failure/finished, after the worker's own
    # Periodic jobs this worker also admits (echomq.protocol.schedules): each tick once, however
    # many workers run the same schedules.
    schedules: Sequence[Schedule] = ()

    def __post_init__(self) -> None:
        if not self.handlers:
            raise InvalidArgument("a worker needs at least one queue and its handler")
        for queue, handler in self.handlers.items():
            keyspace.check_queue(queue)
            if isinstance(handler, str):
                resolve_handler(handler)  # a "package.module:function" path must import now
            elif not callable(handler):
                raise TypeError(f"the handler of queue {queue!r} is not callable")
        if self.grace_s < 0:
            raise InvalidArgument("grace_s must be >= 0")
        if self.schedules:
            AsyncScheduler(_NO_CONNECTOR, self.schedules)  # refuses bad schedules now (no I/O)
        self.consumer_options()  # refuses bad numbers now, not at the first claim
        if self.pool == "process":  # a handler a child cannot import is refused now
            for handler in self.handlers.values():
                handler_path(handler)
        if self.hooks is not None and not isinstance(self.hooks, Hooks):
            raise TypeError(f"hooks must be echomq.Hooks, not {type(self.hooks).__name__}")

    def consumer_options(self) -> ConsumerOptions:
        return ConsumerOptions(beat_ms=self.beat_ms, lease_ms=self.lease_ms,
                               concurrency=self.concurrency, grace_s=self.grace_s,
                               allow_eviction=self.allow_eviction, timeout_ms=self.timeout_ms,
                               pool=self.pool)

    @classmethod
    def from_object(cls, obj: Any) -> WorkerSettings:
        """A WorkerSettings instance as is; an arq-style class: its attributes are the fields."""
        if isinstance(obj, cls):
            return obj
        names = {f.name for f in fields(cls)}
        given = {n: getattr(obj, n) for n in names if hasattr(obj, n)}
        if "handlers" not in given:
            raise TypeError(f"{obj!r} has no 'handlers' (a mapping of queue name to handler)")
        return cls(**given)


@dataclass(slots=True)
class WorkerReport:
    """What a worker did, for its exit line and for tests."""

    name: str
    completed: int = 0
    failed: int = 0
    handed_back: int = 0
    stop_requested_s: float | None = None  # monotonic time of the first stop request
    stopped_s: float | None = None
    per_queue: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def shutdown_s(self) -> float | None:
        """From the stop request to the last consumer done and the registration removed."""
        if self.stop_requested_s is None or self.stopped_s is None:
            return None
        return self.stopped_s - self.stop_requested_s


def load_target(target: str) -> Any:
    """Import ``package.module:attribute`` (the current directory is importable)."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise InvalidArgument(f"expected package.module:attribute, got {target!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise InvalidArgument(f"cannot import {module_name!r}: {exc}") from None
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise InvalidArgument(f"{module_name!r} has no attribute {attr!r}") from None
    return obj


class Worker:
    """Run ``settings`` until :meth:`stop` (or the queues are empty, in burst mode)."""

    def __init__(self, settings: WorkerSettings, *,
                 connector: AsyncConnector | AsyncClusterConnector | None = None,
                 name: str | None = None) -> None:
        self.settings = settings
        self.name = name or worker_name()
        self._connector = connector
        self.consumers: dict[str, Consumer | ShardedConsumer] = {}
        self.minute = MinuteCounts()
        self.report = WorkerReport(name=self.name)
        self.metrics: Any = None  # echomq.ops.metrics.WorkerMetrics when metrics_port is set
        self.scheduler: AsyncScheduler | None = None  # when settings.schedules
        self._started = time.time()
        self._clock_offset_ms = 0.0  # server clock minus ours, for claim-to-start latency
        self._stop = asyncio.Event()
        self._hurry = False

    # ------------------------------------------------------------ hooks
    def _hooks(self, queue: str) -> Hooks:
        """The worker's own hooks on ``queue`` (counts, failure log, metrics), then the
        settings' hooks. Tracing adds its own in front (it opens the handler's span)."""
        own = Hooks(before=[lambda lease: self._began(queue, lease)],
                    after=[lambda lease, outcome, seconds: self._ended(queue, outcome, seconds)],
                    on_failure=[lambda lease, error, seconds: self._failed(queue, lease, error)])
        return own.then(self.settings.hooks)

    def _began(self, queue: str, lease: Lease) -> None:
        if self.metrics is not None:
            claimed_ms = lease.deadline_ms - self.settings.lease_ms  # server clock
            now_ms = time.time() * 1000 + self._clock_offset_ms
            self.metrics.started(queue, max(0.0, (now_ms - claimed_ms) / 1000))

    def _ended(self, queue: str, outcome: Outcome, seconds: float) -> None:
        kind = ("failed" if isinstance(outcome, Backoff) else
                "deferred" if isinstance(outcome, Defer) else "processed")
        self.minute.add(kind)
        if self.metrics is not None:
            self.metrics.handled(queue, seconds, kind)

    def _failed(self, queue: str, lease: Lease, error: BaseException) -> None:
        log.error("%s: job %s (attempt %d) on %s failed", self.name, lease.id, lease.attempt, queue,
                  exc_info=error)

    def about(self) -> dict[str, Any]:
        """What the registration publishes about this worker."""
        return {"host": socket.gethostname(), "pid": os.getpid(), "started": self._started,
                "queues": sorted(self.settings.handlers), "concurrency": self.settings.concurrency,
                "running": sum(c.in_flight for c in self.consumers.values()),
                "completed": sum(c.stats.completed for c in self.consumers.values()),
                "last_minute": self.minute.totals()}

    # ------------------------------------------------------------ running
    def stop(self, *, hurry: bool = False) -> None:
        """Stop claiming and shut down (``hurry``: no grace period, hand back at once)."""
        if self.report.stop_requested_s is None:
            self.report.stop_requested_s = time.monotonic()
        self._hurry = self._hurry or hurry
        self._stop.set()
        for consumer in self.consumers.values():
            consumer.stop(hurry=self._hurry)
        if self.scheduler is not None:
            # Its own stop, not only a cancel: a cancel that lands inside a connector call
            # was seen lost, leaving the scheduler's loop (and the worker's exit) running.
            self.scheduler.stop()

    async def run(self) -> WorkerReport:
        s = self.settings
        own = self._connector is None
        if self._connector is None:
            url = s.url or server_url_from_env()
            if not url:
                raise InvalidArgument("no server: give a url (or --url) or set ECHOMQ_URL")
            self._connector = connect_async(url)
        connector = self._connector
        try:
            return await self._run(connector)
        finally:
            if own:
                await connector.aclose()

    async def _run(self, connector: AsyncConnector | AsyncClusterConnector) -> WorkerReport:
        s = self.settings
        self._clock_offset_ms = await connector.server_time_ms() - time.time() * 1000
        # Refuse (or, if allowed, warn about) a server that could evict jobs, before anything runs.
        await check_eviction_policy(connector, allow=s.allow_eviction, who=self.name)
        if s.on_startup is not None:
            await s.on_startup()
        opts = s.consumer_options()
        if s.metrics_port is not None:  # before the consumers: their hooks observe into it
            from echomq.ops.metrics import WorkerMetrics

            self.metrics = WorkerMetrics(self, port=s.metrics_port, host=s.metrics_host)
        for queue, handler in s.handlers.items():
            count = await shard_count(connector, queue)  # a sharded queue runs as one queue
            q: AsyncQueue | AsyncShardedQueue = (
                AsyncQueue(connector, queue, options=s.queue_options) if count is None else
                AsyncShardedQueue(connector, queue, shards=count, options=s.queue_options))
            await q.fence()  # the queue exists (and speaks our protocol) from the start
            bound_to = getattr(handler, "bound_to", None)
            if callable(bound_to):  # a typed-task app's handler: its tasks' context on this queue
                handler = bound_to(q)
            hooks = self._hooks(queue)
            if s.tracing:
                from echomq.runtime.tracing import JobTracer

                hooks = JobTracer(q, lease_ms=s.lease_ms, clock_offset_ms=self._clock_offset_ms,
                                  tracer_provider=s.tracer_provider).hooks().then(hooks)
            self.consumers[queue] = (
                Consumer(q, handler, options=opts, name=f"{self.name}/{queue}", hooks=hooks)
                if isinstance(q, AsyncQueue) else
                ShardedConsumer(q, handler, options=opts, name=f"{self.name}/{queue}", hooks=hooks))
        registration = Registration(connector, list(s.handlers), name=self.name, beat_s=s.registry_beat_s,
                                    ttl_s=s.registry_ttl_s, about=self.about)
        await registration.beat()
        runs = {asyncio.create_task(c.run(), name=f"{c.name}:run"): c for c in self.consumers.values()}
        aux = [asyncio.create_task(registration.run(), name=f"{self.name}:registry")]
        if s.burst:
            aux.append(asyncio.create_task(self._burst(), name=f"{self.name}:burst"))
        if s.schedules:
            self.scheduler = AsyncScheduler(connector, s.schedules, name=f"{self.name}/schedules")
            aux.append(asyncio.create_task(self._schedules(self.scheduler), name=f"{self.name}:schedules"))
        if self.metrics is not None:
            aux.append(asyncio.create_task(self.metrics.refresh_forever(), name=f"{self.name}:metrics"))
        if self._stop.is_set():
            self.stop(hurry=self._hurry)
        log.info("%s: serving %s (concurrency %d)", self.name, ", ".join(s.handlers), s.concurrency)
        failure: BaseException | None = None
        try:
            while runs:
                done, _ = await asyncio.wait(set(runs), return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    runs.pop(task)
                    exc = None if task.cancelled() else task.exception()
                    if exc is not None and failure is None:
                        failure = exc
                        log.error("%s: a consumer failed; stopping the others", self.name, exc_info=exc)
                        self.stop()
            if failure is not None:
                raise failure
        finally:
            self.stop(hurry=True)
            try:
                await asyncio.gather(*runs, return_exceptions=True)
            finally:  # also when run() is cancelled again meanwhile: its beats went on
                registration.stop()
                for task in aux:
                    task.cancel()
                await asyncio.gather(*aux, return_exceptions=True)
                with contextlib.suppress(Exception):
                    await registration.remove()
                if self.metrics is not None:
                    self.metrics.close()
                if s.on_shutdown is not None:
                    await s.on_shutdown()
                self._fill_report()
        return self.report

    async def _schedules(self, scheduler: AsyncScheduler) -> None:
        try:
            await scheduler.run()  # rides out transient refusals itself
        except Exception as exc:
            log.error("%s: the schedules stopped (%s); stopping the worker", self.name, exc)
            self.stop()
            raise

    def _fill_report(self) -> None:
        r = self.report
        for queue, c in self.consumers.items():
            st = c.stats
            r.per_queue[queue] = {"claimed": st.claimed, "completed": st.completed, "retried": st.retried,
                                  "dead": st.dead, "deferred": st.deferred, "handed_back": st.handed_back,
                                  "lost": st.lost, "reaped": st.reaped}
        r.completed = sum(q["completed"] for q in r.per_queue.values())
        r.failed = sum(q["retried"] + q["dead"] for q in r.per_queue.values())
        r.handed_back = sum(q["handed_back"] for q in r.per_queue.values())
        r.stopped_s = time.monotonic()

    async def _burst(self) -> None:
        """Stop once every queue has nothing pending and nothing runs here (twice in a row)."""
        quiet = 0
        while not self._stop.is_set():
            await asyncio.sleep(self.settings.beat_ms / 1000)
            busy = False
            for c in self.consumers.values():
                if c.in_flight or await c.queue.pending_size():
                    busy = True
                    break
            quiet = 0 if busy else quiet + 1
            if quiet >= 2:
                log.info("%s: burst mode, the queues are empty: stopping", self.name)
                self.stop()


async def run_worker(settings: WorkerSettings, **kwargs: Any) -> WorkerReport:
    """Run a :class:`Worker` until SIGTERM or SIGINT (a second one: no grace period)."""
    worker = Worker(settings, **kwargs)
    loop = asyncio.get_running_loop()

    def on_signal(signame: str) -> None:
        hurry = worker.report.stop_requested_s is not None
        log.warning("%s: %s, %s", worker.name, signame,
                    "handing back in-flight jobs now" if hurry else
                    f"stopping (in-flight jobs have {settings.grace_s:g}s, then are handed back)")
        worker.stop(hurry=hurry)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig.name)
    try:
        return await worker.run()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)


def settings_for(target: Any, **overrides: Any) -> WorkerSettings:
    """Settings from what ``load_target`` found: a handler (``queues`` in ``overrides``),
    a WorkerSettings object, or a typed-task :class:`~echomq.tasks.app.App` (every queue
    its tasks use, or the ``queues`` among them, with their schedules); non-None
    ``overrides`` win."""
    queues = overrides.pop("queues", None) or ()
    given = {k: v for k, v in overrides.items() if v is not None}
    if isinstance(target, App):
        handlers = target.handlers(queues)
        given.setdefault("url", target.url)
        given.setdefault("queue_options", target.queue_options)
        schedules = [x for x in target.schedules if x.queue in handlers]
        return WorkerSettings(handlers=handlers, schedules=given.pop("schedules", schedules), **given)
    if isinstance(target, WorkerSettings) or (inspect.isclass(target) and hasattr(target, "handlers")):
        settings = WorkerSettings.from_object(target)
        if queues:
            raise InvalidArgument("--queue is for a handler; a WorkerSettings names its own queues")
        return replace(settings, **given)
    if not callable(target):
        raise InvalidArgument(f"{target!r} is neither a handler nor a WorkerSettings")
    if not queues:
        raise InvalidArgument("give --queue for the handler (one or more)")
    return WorkerSettings(handlers={q: target for q in queues}, **given)
