"""Round lifecycle on queue ``cm-settle`` (beat 100 ms, lease 10 s).

Two kinds of job, both delayed to their time and both idempotent (see
:mod:`codemojex.service.rounds`): *open* creates a round and schedules its close
and the next open (one that runs early, before the series' open round closes, is
deferred to that close); *close* takes the one-shot ``SET NX`` on ``cm:<round>:closed``,
closes the round, and settles it once every charged guess is scored. While
guesses are still unscored the job answers :class:`~echomq.core.outcomes.Defer`
(no failure counted) and runs again ``RECHECK_MS`` later, but only until
``CLOSE_WAIT_S`` after the round's closing time: past that (a scoring job died,
say) it acks and hands the round over to the reconciler
(:mod:`codemojex.service.reconcile`), which settles every overdue round once its
guesses are scored. A close job never loops forever.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from codemojex.service.codec import BadPayload, CloseRound, decode_round_job
from codemojex.service.context import SETTLE_QUEUE, Services
from codemojex.service.rounds import NotYet, close_and_settle, open_round
from codemojex.wallet import NotReady, get_round
from echomq import Ack, Backoff, ConsumerOptions, Defer, Lease, Outcome

__all__ = ["CLOSE_WAIT_S", "OPTIONS", "QUEUE", "RECHECK_MS", "SettleWorker"]

log = logging.getLogger("codemojex.settle")

QUEUE = SETTLE_QUEUE
OPTIONS = ConsumerOptions(beat_ms=100, lease_ms=10_000, concurrency=4)
RECHECK_MS = 200  # scoring drains in well under a second; re-check often, it is one query
CLOSE_WAIT_S = 30.0  # then the reconciler takes over (a healthy round settles in under a second)


class SettleWorker:
    def __init__(self, services: Services, *, close_wait_s: float = CLOSE_WAIT_S) -> None:
        self.services = services
        self.close_wait_s = close_wait_s
        self.settled = 0
        self.waits = 0
        self.handed_over: list[str] = []

    async def handle(self, lease: Lease) -> Outcome:
        try:
            job = decode_round_job(lease.payload)
        except BadPayload as exc:
            return Backoff(error=f"bad payload: {exc}")
        if not isinstance(job, CloseRound):
            opened = await open_round(self.services, job)
            if isinstance(opened, NotYet):  # the series' open round closes first
                wait = (opened.due - datetime.now(UTC)).total_seconds() * 1000
                return Defer(delay_ms=max(RECHECK_MS, int(wait) + 1))
            return Ack()
        result = await close_and_settle(self.services, job.round_id)
        if isinstance(result, NotReady):
            rnd = await get_round(self.services.pool, job.round_id)
            if rnd is not None and datetime.now(UTC) - rnd.closes_at > timedelta(seconds=self.close_wait_s):
                self.handed_over.append(job.round_id)
                log.warning("round %s: %d guesses still unscored %.0fs after its close; handed over"
                            " to the reconciler", job.round_id, result.unscored, self.close_wait_s)
                return Ack()
            self.waits += 1
            log.debug("round %s: %d guesses unscored; re-checking", job.round_id, result.unscored)
            return Defer(delay_ms=RECHECK_MS)
        if result is not None:
            self.settled += 1
        return Ack()
