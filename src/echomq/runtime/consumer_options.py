"""What a consumer is given and what it counts: its handler type, options and stats.

Pure data (no I/O), kept apart from :mod:`echomq.runtime.consumer`'s loops so that the options a
deployment sets and the figures it reads are found in one short file.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from echomq.core.bounds import MAX_BEAT_MS, MAX_COUNT, MAX_DELAY_MS, MAX_LEASE_MS, check_int
from echomq.core.errors import InvalidArgument
from echomq.core.model import Lease
from echomq.core.outcomes import BackoffPolicy, Outcome

__all__ = ["ConsumerOptions", "ConsumerStats", "Handler"]

Handler = Callable[[Lease], Awaitable[Outcome] | Outcome]
"""An ``async def`` handler runs on the event loop; a plain function runs in a thread (or,
with ``pool="process"``, in a child process, named by its ``package.module:function`` path)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerOptions:
    """The two numbers of a leased consumer (``beat_ms``, ``lease_ms``) plus how many jobs run at once.

    ``beat_ms`` is the poll-and-heartbeat cadence; ``lease_ms`` how long a claimed job
    stays invisible without a heartbeat. A lease must outlive several beats, so one
    slow round trip does not lose it.
    """

    beat_ms: int = 100
    lease_ms: int = 10_000
    # Handlers running at once; it sets the batch size of the drain loop
    # (docs/decisions/0008-drain-path.md). With a deep backlog the consumer leases up to
    # as many more ahead of the running handlers (decision 0025), handed back at once on
    # stop if not started. A plain-function handler gets one worker thread per slot.
    concurrency: int = 32
    grace_s: float = 10.0
    backoff: BackoffPolicy = field(default_factory=BackoffPolicy)
    maintenance: bool = True
    trim_every: int = 50  # beats between retention passes
    # Run even if the server's maxmemory-policy could evict jobs (echomq.core.eviction).
    allow_eviction: bool = False
    # A handler running longer fails its attempt (HandlerTimeout) and gives the lease back
    # at once (echomq.runtime.handling); None: no limit. Heartbeats keep the lease meanwhile, so a
    # timeout may be longer than lease_ms.
    timeout_ms: int | None = None
    # Park when idle so admission hands the next job over in its own step (decision 0018).
    handoff: bool = True
    # Where a blocking handler runs: "thread" (a worker thread per slot) or "process" (a
    # child process per slot that only computes, killed at its timeout before the attempt
    # is handed back: echomq.runtime.process_pool, decision 0035); then the handler must be a
    # module-level function or its "package.module:function" path.
    pool: str = "thread"
    # In the process pool: SIGTERM to a child whose attempt ends early, SIGKILL this long after.
    kill_grace_s: float = 1.0

    def __post_init__(self) -> None:
        check_int("beat_ms", self.beat_ms, 1, MAX_BEAT_MS)
        check_int("lease_ms", self.lease_ms, 1, MAX_LEASE_MS)
        check_int("concurrency", self.concurrency, 1, MAX_COUNT)
        check_int("trim_every", self.trim_every, 1, 1_000_000)
        if self.timeout_ms is not None:
            check_int("timeout_ms", self.timeout_ms, 1, MAX_DELAY_MS)
        if self.lease_ms < 3 * self.beat_ms:
            raise InvalidArgument("lease_ms must be at least three beats")
        if not isinstance(self.grace_s, int | float) or not 0 <= self.grace_s <= 86_400:
            raise InvalidArgument("grace_s must be a number of seconds in 0..86400")
        if self.pool not in ("thread", "process"):
            raise InvalidArgument(f"pool must be 'thread' or 'process', not {self.pool!r}")
        if not isinstance(self.kill_grace_s, int | float) or not 0 <= self.kill_grace_s <= 60:
            raise InvalidArgument("kill_grace_s must be a number of seconds in 0..60")


@dataclass(slots=True)
class ConsumerStats:
    claimed: int = 0
    completed: int = 0
    retried: int = 0
    deferred: int = 0
    dead: int = 0
    lost: int = 0  # leases found lost: outcome discarded
    stale: int = 0  # finishes refused by the fence
    errors: int = 0  # transient server errors ridden out
    handed_back: int = 0  # in flight at the end of the grace period: pending again at once
    cancelled: int = 0  # attempts of jobs asked to stop (cancel): they ended cancelled
    handed_off: int = 0  # of ``claimed``: leased to this consumer by an admission while parked
    reaped: int = 0  # expired leases this consumer's upkeep re-exposed (requeued or dead)
    episodes: int = 0  # episodes of back-pressure or transient refusals (echomq.client.replies)
    refusals: dict[str, int] = field(default_factory=dict)  # episodes by reply code (OOM, BUSY)
    memory_full: int = 0  # episodes of the server at maxmemory (admissions refused; it drains)
    flows_released: int = 0  # flow parents this consumer's relay released (decision 0038)
    flows_failed: int = 0  # flow parents this consumer's relay failed by their 'fail' policy
