"""How a consumer writes a job's end: the handler's outcome, fenced by its attempt, and
the hand-back of unfinished jobs when it stops (:class:`echomq.runtime.consumer.Consumer`).

``None`` or :class:`Ack` completes (through the consumer's group commit,
:mod:`echomq.runtime.ack_batcher`); :class:`Defer` retries without counting a failure;
:class:`Backoff` counts one (dead at the attempt limit, or at once with ``give_up``). A job
asked to stop ends ``cancelled`` whichever of them its attempt writes. A refusal the server may outlive
is retried while the lease may still hold; after that the lease expires and reap runs
the job again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from echomq.client._async.queue import AsyncQueue
from echomq.client.replies import classify
from echomq.core.backoff import BackoffDelays
from echomq.core.failures import clip
from echomq.core.model import Completion, Lease, RetryOutcome
from echomq.core.outcomes import Ack, Backoff, BackoffPolicy, Defer, Outcome
from echomq.runtime.ack_batcher import AckBatcher
from echomq.runtime.consumer_options import ConsumerStats

__all__ = ["hand_back", "record_outcome"]

log = logging.getLogger("echomq.runtime.consumer")


async def hand_back(queue: AsyncQueue, stats: ConsumerStats, leases: list[Lease], *,
                    name: str) -> None:
    """Return unfinished jobs to pending now, fenced by their attempt, no failure counted
    (a finish that landed meanwhile makes this STALE: nothing changes)."""
    replies = await asyncio.gather(*(queue.defer(x, delay_ms=0) for x in leases),
                                   return_exceptions=True)
    for lease, reply in zip(leases, replies, strict=True):
        if isinstance(reply, BaseException):
            log.warning("%s: could not hand back %s (%r); its lease will expire",
                        name, lease.id, reply)
        elif reply is RetryOutcome.SCHEDULED:
            stats.handed_back += 1


async def record_outcome(queue: AsyncQueue, acks: AckBatcher, stats: ConsumerStats, lease: Lease,
                         outcome: Outcome, *, lease_ms: int, backoff: BackoffPolicy, name: str,
                         stopped: Callable[[], bool]) -> None:
    """Write ``outcome`` for ``lease`` and count it in ``stats``; a refusal the server may
    outlive is retried until ``lease_ms`` has passed or ``stopped()`` (a configuration
    error stopped the consumer); another error is raised."""
    q = queue
    limit = q.options.max_result
    if isinstance(outcome, Ack) and len(outcome.result) > limit:
        # A result the queue may not keep is the handler's failure, never a dead finish.
        outcome = Backoff(error=f"PayloadTooLarge: the handler's result of {len(outcome.result)} "
                                f"bytes exceeds max_result={limit}")
    delays = BackoffDelays(0.05, 2.0)
    give_up = time.monotonic() + lease_ms / 1000
    while True:
        try:
            if outcome is None or isinstance(outcome, Ack):
                result = outcome.result if isinstance(outcome, Ack) else b""
                done = await acks.complete(lease, result)
                if done is Completion.COMPLETED:
                    stats.completed += 1
                elif done is Completion.CANCELLED:
                    stats.cancelled += 1
                else:
                    stats.stale += 1
            elif isinstance(outcome, Defer):
                if await q.defer(lease, delay_ms=outcome.delay_ms) is RetryOutcome.CANCELLED:
                    stats.cancelled += 1
                else:
                    stats.deferred += 1
            elif isinstance(outcome, Backoff):
                wait = outcome.delay_ms
                if wait is None:
                    wait = backoff.delay_ms(lease.attempt)
                verdict = await q.retry(lease, delay_ms=wait,
                                        error=clip(outcome.error, q.options.max_error),
                                        give_up=outcome.give_up)
                if verdict is RetryOutcome.DEAD:
                    stats.dead += 1
                elif verdict is RetryOutcome.CANCELLED:
                    stats.cancelled += 1
                elif verdict is RetryOutcome.STALE:
                    stats.stale += 1
                else:
                    stats.retried += 1
            else:
                raise TypeError(f"handler returned {outcome!r}; expected Ack, Defer, Backoff")
            return
        except Exception as exc:
            refusal = classify(exc)
            if not refusal.kind.retry:
                raise
            # Keep trying while the lease may still hold; after that reap re-runs the job.
            # (The drain loop, which sent the flush, logged and counted the episode.)
            if time.monotonic() > give_up or stopped():
                log.warning("%s: could not finish %s (%s); its lease will expire",
                            name, lease.id, refusal.code)
                return
            stats.errors += 1
            await asyncio.sleep(next(delays))
