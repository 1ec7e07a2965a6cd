"""One attempt's handler call: its timeout and the hooks around it (:mod:`echomq.core.hooks`).

A handler that runs past its timeout is a failed attempt. The timeout is the job's own
when it was given one at admission (``admit(..., timeout_ms=)``, kept in its row and
returned by ``claim`` as :attr:`~echomq.core.model.Lease.timeout_ms`), else the consumer's
``timeout_ms`` (:func:`timeout_for`). A timed-out attempt's outcome is ``Backoff`` whose
error is :class:`~echomq.core.errors.HandlerTimeout`, so the consumer writes it at once with
the fenced ``retry`` (the lease is given back now, not left to expire; dead at the attempt
limit). An ``async def`` handler is cancelled at its timeout. A plain-function handler
runs in a thread, which Python cannot stop: its attempt is failed and handed back all the
same, and whatever it returns later is discarded (the thread's slot stays busy until it
returns). In the process pool (:mod:`echomq.runtime.process_pool`) the handler's child process is
killed and reaped at the timeout, before the failure is written.

A cancellation (a lost lease, the end of the grace period) passes through untouched: it
is not a failure, and no ``after`` or ``on_failure`` hook runs for it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from echomq.core.errors import HandlerTimeout
from echomq.core.failures import failure_text
from echomq.core.hooks import Hooks
from echomq.core.model import Lease
from echomq.core.outcomes import Backoff, Outcome

__all__ = ["call_handler", "failed_outcome", "shape_failure", "timed_out", "timeout_for"]

log = logging.getLogger("echomq.runtime.consumer")


_SHAPED = "_echomq_outcome"


def shape_failure(exc: BaseException, outcome: Backoff) -> bool:
    """Attach the outcome a handler's exception should have (a typed task's retry policy:
    its delay, or give up) and let the exception propagate: the consumer still logs it and
    runs the ``on_failure`` hooks with it. False when ``exc`` takes no attribute (then the
    handler returns ``outcome`` itself)."""
    try:
        setattr(exc, _SHAPED, outcome)
    except (AttributeError, TypeError):
        return False
    return True


def failed_outcome(exc: BaseException) -> Backoff:
    """The outcome of a handler that raised ``exc``: the one :func:`shape_failure`
    attached, else a failure counted with the exception's text."""
    shaped = getattr(exc, _SHAPED, None)
    return shaped if type(shaped) is Backoff else Backoff(error=failure_text(exc))


def timeout_for(lease: Lease, default_ms: int | None) -> int | None:
    """The handler timeout of ``lease``'s attempt: the job's own (set at admission) in
    preference to the consumer's ``default_ms``; None for no limit."""
    return lease.timeout_ms if lease.timeout_ms is not None else default_ms


def timed_out(lease: Lease, timeout_ms: int) -> HandlerTimeout:
    """The failure of ``lease``'s attempt whose handler ran past ``timeout_ms``."""
    whose = "the job's, set at admission" if lease.timeout_ms == timeout_ms else "the consumer's"
    return HandlerTimeout(f"the handler ran past its timeout of {timeout_ms} ms "
                          f"({whose}; job {lease.id}, attempt {lease.attempt})")


def _log_failure(who: str, lease: Lease, exc: Exception) -> None:
    if isinstance(exc, HandlerTimeout):  # the process pool's own timeout: no traceback to show
        log.warning("%s: %s", who, exc)
    else:
        log.warning("%s: job %s attempt %d failed", who, lease.id, lease.attempt, exc_info=exc)


async def call_handler(run: Callable[[], Awaitable[Outcome]], lease: Lease, *, timeout_ms: int | None,
                       hooks: Hooks, who: str) -> Outcome:
    """Run ``before`` hooks, the handler (``run()``) within ``timeout_ms``, then ``on_failure``
    (an exception or the timeout) and ``after``; returns the outcome to write."""
    if timeout_ms is None and not hooks:  # the common case: no hook to call, no clock to keep
        try:
            return await run()
        except Exception as exc:
            _log_failure(who, lease, exc)
            return failed_outcome(exc)
    await hooks.run_before(lease)
    began = time.perf_counter()
    error: BaseException | None = None
    try:
        if timeout_ms is None:
            outcome = await run()
        else:
            deadline = asyncio.timeout(timeout_ms / 1000)
            try:
                async with deadline:
                    outcome = await run()
            except TimeoutError:
                if not deadline.expired():
                    raise  # the handler's own TimeoutError: an ordinary failure
                error = timed_out(lease, timeout_ms)
                log.warning("%s: %s", who, error)
                outcome = Backoff(error=failure_text(error))
    except Exception as exc:
        _log_failure(who, lease, exc)
        error, outcome = exc, failed_outcome(exc)
    seconds = time.perf_counter() - began
    if error is not None:
        await hooks.run_failure(lease, error, seconds)
    await hooks.run_after(lease, outcome, seconds)
    return outcome
