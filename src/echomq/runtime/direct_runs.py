"""Direct runs: a blocking handler's lease run straight on a handler thread, no task per job.

The consumer's path for a plain-function handler when it has no hooks and the attempt no
handler timeout (docs/decisions/0025-direct-runs.md); every other attempt has a task of its
own (:meth:`echomq.runtime.task_runs.TaskRuns._run_one`). Per job the loop does no task, no future
and no wake-up of its own: the lease goes to the threads' queue, the thread turns the
handler's return value into its outcome, and the loop hears every outcome that landed
meanwhile in one call (:meth:`DirectRuns.on_results`). A completion joins the drain
loop's next flush with a callback for its verdict (:meth:`echomq.runtime.ack_batcher.AckBatcher.add`).

The guarantees are the task path's:

* the lease is in the consumer's :class:`~echomq.runtime.lease_table.LeaseTable` from the claim
  to the verdict, so heartbeats extend it while the handler runs (not while its outcome
  is written: the fence decides) and ``concurrency`` threads bound the running handlers;
* a lease a heartbeat found lost is dropped from the table: the thread cannot be
  stopped, and what it returns is discarded (the job runs elsewhere);
* a handler's exception (or a return value that is no outcome) is logged and fails the
  attempt (``Backoff`` with its text), a ``Defer`` or ``Backoff`` is written by the same
  fenced ``retry`` as on the task path, a completion the server refused is retried while
  the lease may hold;
* at stop the leases no thread has taken yet are taken back (they never run) and handed
  back at once; those still running when the grace period ends are given up by the
  consumer (handed back) and their outcomes discarded.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from echomq.client.replies import classify
from echomq.core.failures import failure_text
from echomq.core.model import Completion, Lease
from echomq.core.outcomes import Ack, Backoff, Outcome
from echomq.runtime._threads import DirectResult
from echomq.runtime.ack_batcher import AckBatcher
from echomq.runtime.consumer_options import ConsumerStats
from echomq.runtime.lease_table import LeaseTable

__all__ = ["DirectRuns"]

log = logging.getLogger("echomq.runtime.consumer")


class DirectRuns:
    """The consumer's direct runs: outcomes in, finishes out (see the module)."""

    def __init__(self, *, leases: LeaseTable, acks: AckBatcher, stats: ConsumerStats,
                 kick: asyncio.Event, name: str,
                 finish: Callable[[Lease, Outcome], Awaitable[None]],
                 failed: Callable[[BaseException, Lease], None]) -> None:
        self._leases, self._acks, self._stats, self._kick = leases, acks, stats, kick
        self._name = name
        self._finish, self._failed = finish, failed
        self._tasks: set[asyncio.Task[None]] = set()

    def on_results(self, results: list[DirectResult]) -> None:
        """The outcomes that landed since the last call (on the loop, from the threads)."""
        table = self._leases
        for lease, outcome, error in results:
            if not table.holds_direct(lease):
                continue  # lost, or given up at the end of a stop: the outcome is discarded
            if error is not None:
                if not isinstance(error, Exception):  # SystemExit and the like: not a failure
                    log.error("%s: the handler of %s ended with %r; its lease will expire",
                              self._name, lease.id, error)
                    table.end_direct(lease)
                    continue
                log.warning("%s: job %s attempt %d failed", self._name, lease.id, lease.attempt,
                            exc_info=error)
                outcome = Backoff(error=failure_text(error))
            table.start_finishing(lease)
            if outcome is None:
                self._acks.add(lease, b"", _Verdict(self, lease))
            elif isinstance(outcome, Ack):
                self._acks.add(lease, outcome.result, _Verdict(self, lease))
            else:
                self._spawn(self._finish_one(lease, outcome))
        self._kick.set()

    def verdict(self, lease: Lease, verdict: Completion) -> None:
        if verdict is Completion.COMPLETED:
            self._stats.completed += 1
        elif verdict is Completion.CANCELLED:
            self._stats.cancelled += 1
        else:
            self._stats.stale += 1
        self._leases.end_direct(lease)
        self._kick.set()

    def refused(self, lease: Lease, exc: BaseException) -> None:
        """The flush carrying this completion failed (the drain loop logged the episode):
        retried on its own while the lease may hold, as the task path's finish is."""
        if not classify(exc).kind.retry:
            self._failed(exc, lease)
            self._leases.end_direct(lease)
            self._kick.set()
            return
        self._stats.errors += 1
        self._spawn(self._finish_one(lease, None, after=0.05))

    async def _finish_one(self, lease: Lease, outcome: Outcome, *, after: float = 0.0) -> None:
        try:
            if after:
                await asyncio.sleep(after)
            await self._finish(lease, outcome)
        except Exception as exc:
            self._failed(exc, lease)
        finally:
            self._leases.end_direct(lease)
            self._kick.set()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:  # observed, never lost
            log.error("%s: a direct run's finish ended with an error", self._name,
                      exc_info=task.exception())

    def tasks(self) -> list[asyncio.Task[None]]:
        return list(self._tasks)


class _Verdict:
    """A direct completion's waiter in the ack batcher: the verdict goes straight to
    :class:`DirectRuns` (the batcher's :class:`~echomq.runtime.ack_batcher.Waiter`)."""

    __slots__ = ("_lease", "_runs")

    def __init__(self, runs: DirectRuns, lease: Lease) -> None:
        self._runs, self._lease = runs, lease

    def done(self) -> bool:
        return False

    def set_result(self, verdict: Completion, /) -> None:
        self._runs.verdict(self._lease, verdict)

    def set_exception(self, exc: BaseException, /) -> None:
        self._runs.refused(self._lease, exc)
