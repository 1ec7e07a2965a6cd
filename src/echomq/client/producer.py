"""A streaming producer: jobs one by one, admitted in pipelined flushes, two in flight.

Sequential ``enqueue_many`` calls of 1,000 wait for each flush before building the next,
so the client and the server take turns. :class:`Producer` takes jobs one at a time
(``await producer.put(id, payload)`` returns a future of that job's verdict at once),
gathers them in a buffer and keeps up to ``in_flight`` (at least two) ``enqueue_many``
flushes running, so the next flush is built and sent while the previous one is answered.

* Each future resolves to exactly what ``enqueue_many`` reports for that item: a
  :class:`~echomq.core.model.Verdict`, or the item's typed error in its place. If a flush fails
  as a whole (the server is unreachable), each of its futures raises that error; the
  jobs' fate is then unknown and sending them again is safe (the id is the idempotency key).
* Verdicts follow input order also for a repeated id: an item whose id is in a flush
  still running waits for that flush, so the first occurrence is admitted first.
* Back-pressure: at most ``max_buffered`` jobs are accepted and not yet answered;
  ``put`` waits for room beyond that.
* ``flush()`` returns once every job accepted before it has its verdict; ``aclose()``
  refuses new jobs, then flushes: an accepted job is never dropped.
"""

from __future__ import annotations

import asyncio
from collections import deque
from types import TracebackType

from echomq.client._async.queue import AsyncQueue
from echomq.core.errors import EchoMQError, InvalidArgument
from echomq.core.model import Verdict

__all__ = ["Producer", "ProducerClosed"]

Result = Verdict | EchoMQError
Item = tuple[tuple[str, bytes], "asyncio.Future[Result]"]


class ProducerClosed(EchoMQError):
    """``put`` on a producer that is closing or closed."""


class Producer:
    """Streams jobs into ``queue`` (see the module docstring). Use from one event loop."""

    def __init__(
        self, queue: AsyncQueue, *, flush_size: int = 1000, in_flight: int = 2, max_buffered: int = 10_000
    ) -> None:
        if type(flush_size) is not int or flush_size < 1:
            raise InvalidArgument(f"flush_size is an int >= 1, not {flush_size!r}")
        if type(in_flight) is not int or in_flight < 2:
            raise InvalidArgument(f"in_flight is an int >= 2, not {in_flight!r}")
        if type(max_buffered) is not int or max_buffered < flush_size:
            raise InvalidArgument(f"max_buffered is an int >= flush_size, not {max_buffered!r}")
        self.queue = queue
        self.flush_size, self.in_flight, self.max_buffered = flush_size, in_flight, max_buffered
        self._buffer: deque[Item] = deque()
        self._flying: set[asyncio.Task[None]] = set()
        self._flying_ids: dict[str, int] = {}  # id -> how many running flushes hold it
        self._outstanding = 0  # accepted, not yet answered
        self._room = asyncio.Condition()
        self._closed = False

    @property
    def outstanding(self) -> int:
        """Jobs accepted and not yet answered (never more than ``max_buffered``)."""
        return self._outstanding

    async def put(self, job_id: str, payload: bytes) -> asyncio.Future[Result]:
        """Accept one job; returns the future of its verdict. Waits while the buffer is full."""
        if self._closed:
            raise ProducerClosed("this producer is closed; it accepts no more jobs")
        if self._outstanding >= self.max_buffered:
            async with self._room:
                await self._room.wait_for(lambda: self._outstanding < self.max_buffered)
            if self._closed:
                raise ProducerClosed("this producer closed while put waited for room")
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._buffer.append(((job_id, payload), future))
        self._outstanding += 1
        if len(self._flying) < self.in_flight:  # else the next flush to answer pumps
            self._pump()
        return future

    async def flush(self) -> None:
        """Return once every job accepted so far has its verdict."""
        waiting = [f for _, f in self._buffer]
        tasks = set(self._flying)
        if tasks:
            await asyncio.wait(tasks)
        if waiting:
            await asyncio.wait(waiting)

    async def aclose(self) -> None:
        """Refuse new jobs, then answer every accepted one."""
        self._closed = True
        while self._buffer or self._flying:
            await self.flush()

    async def __aenter__(self) -> Producer:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def _pump(self) -> None:
        # Start flushes while fewer than in_flight run and the buffer holds jobs.
        while self._buffer and len(self._flying) < self.in_flight:
            chunk: list[Item] = []
            ids: list[str] = []
            while self._buffer and len(chunk) < self.flush_size:
                item = self._buffer[0]
                job_id = item[0][0]
                if type(job_id) is str and job_id in self._flying_ids:
                    break  # a running flush holds this id: it goes after that flush answers
                chunk.append(self._buffer.popleft())
                if type(job_id) is str:
                    ids.append(job_id)
            if not chunk:
                return
            for job_id in ids:
                self._flying_ids[job_id] = self._flying_ids.get(job_id, 0) + 1
            task = asyncio.get_running_loop().create_task(self._send(chunk, ids))
            self._flying.add(task)

    async def _send(self, chunk: list[Item], ids: list[str]) -> None:
        try:
            verdicts = await self.queue.enqueue_many([pair for pair, _ in chunk])
        except BaseException as exc:  # the flush failed as a whole: each job learns it
            for _, future in chunk:
                if future.done():
                    continue
                if isinstance(exc, Exception):
                    future.set_exception(exc)
                else:  # cancelled (the loop is closing): so is the verdict
                    future.cancel()
            if not isinstance(exc, Exception):
                raise
        else:
            for (_, future), verdict in zip(chunk, verdicts, strict=True):
                if not future.done():
                    future.set_result(verdict)
        finally:
            task = asyncio.current_task()
            if task is not None:
                self._flying.discard(task)
            for job_id in ids:
                left = self._flying_ids[job_id] - 1
                if left:
                    self._flying_ids[job_id] = left
                else:
                    del self._flying_ids[job_id]
            self._outstanding -= len(chunk)
            async with self._room:
                self._room.notify_all()
            self._pump()
