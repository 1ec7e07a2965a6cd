"""Blocking handlers in processes of their own: ``ConsumerOptions(pool="process")``.

After BullMQ's sandboxed processors and Celery's prefork pool
(docs/decisions/0035-process-pool.md): the consumer (the parent) keeps the lease, its
heartbeats and the fenced finish; a child process (:mod:`echomq.runtime.pool_child`) only
computes, so a handler that holds the GIL, or never returns, can neither starve the
heartbeats nor outlive its attempt.

* The handler is named by an importable ``package.module:function`` path (given as a
  string, or derived from a module-level function by :func:`handler_path`); each child
  imports it. Payload bytes go in, a small JSON outcome record (and an ``Ack``'s result
  bytes) come out, over the child's pipes; nothing is pickled.
* One job at a time per child. Children are started on demand and reused; at most
  ``size`` idle ones are kept.
* When the attempt's task is cancelled (its timeout, a lost lease, a cancel request, the
  end of the grace period at stop), the child's process group gets SIGTERM, then SIGKILL
  after ``kill_grace_s``, and is reaped *before* the cancellation goes on: the attempt
  is written (retry, hand-back) only once its process is gone, so two runs of one job
  never overlap through this worker.
* A child that dies mid-attempt (a signal such as SIGSEGV or SIGKILL, the OOM killer,
  ``os._exit``) fails the attempt with :class:`~echomq.errors.HandlerCrashed`; the
  worker goes on, and the next job gets a fresh child.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from echomq.core.errors import HandlerCrashed, HandlerTimeout, InvalidArgument
from echomq.core.model import Lease
from echomq.core.outcomes import Ack, Backoff, Defer, Outcome
from echomq.runtime import pool_child
from echomq.runtime.handling import timed_out, timeout_for
from echomq.runtime.lease_table import to_the_end

__all__ = ["ProcessPool", "handler_path", "pooled", "resolve_handler"]

log = logging.getLogger("echomq.consumer")


def resolve_handler(path: str) -> Any:
    """The callable a ``package.module:function`` path names (InvalidArgument if none)."""
    try:
        found = pool_child.resolve(path)
    except (ImportError, AttributeError, ValueError) as exc:
        raise InvalidArgument(f"cannot import the handler {path!r}: {exc}") from None
    if not callable(found):
        raise InvalidArgument(f"the handler {path!r} is not callable")
    return found


def handler_path(handler: Any) -> str:
    """The importable ``module:function`` path of ``handler`` (a string is checked as is).

    Refused (InvalidArgument): an ``async def`` (it belongs on the event loop), a lambda
    or nested function, a callable object, or a function of ``__main__`` (a child cannot
    import any of them by name)."""
    if isinstance(handler, str):
        path, handler = handler, resolve_handler(handler)
    else:
        module = getattr(handler, "__module__", None)
        qualname = getattr(handler, "__qualname__", None)
        if not inspect.isfunction(handler) or not module or not qualname \
                or "<" in qualname or module == "__main__":
            raise InvalidArgument(
                f"a process-pool handler must be a module-level function importable by name "
                f"(or its 'package.module:function' path), not {handler!r}")
        path = f"{module}:{qualname}"
        try:
            found = pool_child.resolve(path)
        except (ImportError, AttributeError, ValueError):
            found = None
        if found is not handler:
            raise InvalidArgument(f"the handler {handler!r} is not importable as {path}")
    if inspect.iscoroutinefunction(handler):
        raise InvalidArgument(f"the handler {path!r} is async def: the process pool runs "
                              "blocking handlers (an async one runs on the event loop)")
    return path


class _Child:
    __slots__ = ("proc",)

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @property
    def pid(self) -> int:
        return self.proc.pid

    async def send(self, header: dict[str, Any], body: bytes = b"") -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(pool_child.frame(header, body))
        await self.proc.stdin.drain()

    async def receive(self) -> tuple[dict[str, Any], bytes]:
        assert self.proc.stdout is not None
        read = self.proc.stdout.readexactly
        head_n, body_n = pool_child.decode_header(await read(8))
        head = await read(head_n)
        body = await read(body_n) if body_n else b""
        import json

        header = json.loads(head)
        if not isinstance(header, dict):  # not this protocol: as good as a broken pipe
            raise ConnectionError("a frame header that is not an object")
        return header, body


class ProcessPool:
    """Children running ``target`` (a ``module:function`` path); :meth:`run` one attempt."""

    def __init__(self, target: str, *, size: int, kill_grace_s: float, name: str,
                 timeout_ms: int | None = None) -> None:
        self.target, self.size, self.kill_grace_s, self.name = target, size, kill_grace_s, name
        self.timeout_ms = timeout_ms  # the consumer's; a job's own (admission) wins
        self._idle: list[_Child] = []
        self.started = 0  # children started so far (a crashed or killed one is replaced)

    async def run(self, lease: Lease) -> Outcome:
        """Run one attempt in a child; its outcome, or HandlerCrashed if the child died.

        The attempt's timeout (the job's own, else the pool's ``timeout_ms``) runs from the
        moment a child holds the job, not while one starts: past it the child is killed and
        reaped, then HandlerTimeout is raised. A cancellation kills the child the same way
        and waits until it is reaped before it goes on."""
        child = None
        while child is None and self._idle:
            child = self._idle.pop()
            if child.proc.returncode is not None:  # died while idle: not this job's doing
                child = None
        try:
            if child is None:
                child = await self._start()
            await child.send({"queue": lease.queue, "id": lease.id, "attempt": lease.attempt,
                              "lane": lease.lane, "deadline_ms": lease.deadline_ms,
                              "timeout_ms": lease.timeout_ms}, lease.payload)
            header, body = await self._answer(child, lease)
        except HandlerTimeout:
            raise  # (a TimeoutError, so an OSError: not a crash) its child is gone already
        except (OSError, EOFError, ValueError) as exc:  # the child died (or spoke nonsense)
            code = await self._end(child) if child is not None else None
            raise HandlerCrashed(f"the handler's process {_how(code)} during job {lease.id} "
                                 f"(attempt {lease.attempt})") from exc
        except BaseException:  # cancelled (timeout, lost lease, stop): gone before we go on
            if child is not None:
                await _unstoppable(self._end(child))
            raise
        if len(self._idle) < self.size:
            self._idle.append(child)
        else:
            await self._end(child)
        return self._outcome(lease, header, body)

    async def _answer(self, child: _Child, lease: Lease) -> tuple[dict[str, Any], bytes]:
        limit = timeout_for(lease, self.timeout_ms)
        if limit is None:
            return await child.receive()
        deadline = asyncio.timeout(limit / 1000)
        try:
            async with deadline:
                return await child.receive()
        except TimeoutError:
            if not deadline.expired():
                raise
        await _unstoppable(self._end(child))  # gone before the failure is written
        raise timed_out(lease, limit)

    def _outcome(self, lease: Lease, header: dict[str, Any], body: bytes) -> Outcome:
        kind = header.get("kind")
        if kind == "none":
            return None
        if kind == "ack":
            return Ack(result=body)
        if kind == "defer":
            return Defer(delay_ms=int(header["delay_ms"]))
        if kind == "backoff":
            delay = header.get("delay_ms")
            return Backoff(error=str(header.get("error", "")), delay_ms=None if delay is None else int(delay))
        error = str(header.get("error", f"an answer of kind {kind!r}"))
        log.warning("%s: job %s attempt %d failed in its process: %s", self.name, lease.id,
                    lease.attempt, error)
        return Backoff(error=error)

    async def _start(self) -> _Child:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", pool_child.__name__, self.target, str(os.getpid()),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            start_new_session=True)  # its own process group: a kill reaches what it started
        child = _Child(proc)
        self.started += 1
        try:
            await child.send({"sys_path": sys.path})
            header, _ = await child.receive()
        except BaseException:
            await _unstoppable(self._end(child))
            raise
        if "ready" not in header:
            await self._end(child)
            raise HandlerCrashed(f"the handler's process could not load {self.target}: "
                                 f"{header.get('fatal', header)}")
        return child

    async def _end(self, child: _Child) -> int | None:
        """Stop ``child`` (SIGTERM to its group, SIGKILL after the grace), reap it, and kill
        whatever it left in its group; its exit status."""
        proc = child.proc
        if proc.returncode is None:
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), self.kill_grace_s)
            except TimeoutError:
                _signal_group(proc.pid, signal.SIGKILL)
                await proc.wait()
        _signal_group(proc.pid, signal.SIGKILL)  # grandchildren that outlived it
        return proc.returncode

    async def aclose(self) -> None:
        """End the idle children: EOF first (they exit), a kill if they do not within a second."""
        idle, self._idle = self._idle, []
        for child in idle:
            if child.proc.stdin is not None:
                child.proc.stdin.close()
        for child in idle:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(child.proc.wait(), 1.0)
            await self._end(child)


def pooled(handler: Any, *, size: int, kill_grace_s: float, name: str,
           timeout_ms: int | None) -> tuple[Callable[[Lease], Awaitable[Outcome]], ProcessPool]:
    """``handler`` as an async handler that runs each attempt in a :class:`ProcessPool`."""
    pool = ProcessPool(handler_path(handler), size=size, kill_grace_s=kill_grace_s, name=name,
                       timeout_ms=timeout_ms)
    return pool.run, pool


def _how(code: int | None) -> str:
    if code is None:
        return "could not be reached"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


async def _unstoppable(aw: Awaitable[Any]) -> None:
    """Await ``aw`` to its end even if the caller is cancelled meanwhile (again): a kill
    must complete before the attempt is handed back. A cancellation that came meanwhile
    goes on after it (it was swallowed: an attempt cancelled while its timed-out child was
    being killed ended in HandlerTimeout, and its task went on to write that failure)."""
    try:
        await to_the_end(aw, what="stopping a handler's process")
    except Exception:  # the child is as gone as it will get; the attempt's end is the caller's
        log.error("stopping a handler's process failed", exc_info=True)
