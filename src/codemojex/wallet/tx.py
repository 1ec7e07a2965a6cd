"""Transactions and bounded retries: how every wallet call talks to PostgreSQL.

:func:`transaction` opens one transaction on a pooled connection and sets its
isolation level explicitly (``READ COMMITTED`` unless asked otherwise), so the
wallet behaves the same on a server whose default is ``REPEATABLE READ``: the
lock-then-read steps of a charge or a close need a fresh snapshot per statement.

:func:`retry` (and the :func:`retried` decorator every public wallet call
wears) runs a call again after a *transient* failure (any
``psycopg.OperationalError``: a dropped or refused connection, an
administrator shutdown, a server restart, a deadlock victim, a serialization
failure, a pool checkout timeout) with a growing, jittered delay, until the
policy's deadline. Past it the call raises :class:`~codemojex.domain.errors.Unavailable`;
any other ``psycopg`` error becomes :class:`~codemojex.domain.errors.DatabaseError`.
No ``psycopg`` exception type leaves the wallet.

A retry is safe because every movement carries a unique ref: when a commit
succeeded but its reply was lost, the retry finds the ref and applies nothing
(a charge answers ``AlreadyCharged``, a grant ``AlreadyApplied``, a settlement
its stored payouts). After a lost connection the retry has the pool check its idle
connections (``pool.check()``), which replaces the broken ones at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Literal, ParamSpec, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolClosed, PoolTimeout

from codemojex.domain.errors import ConfigurationError, DatabaseError, Unavailable
from codemojex.wallet.locks import Conn
from echomq import BackoffDelays

__all__ = [
    "STATS",
    "RetryPolicy",
    "RetryStats",
    "connection_lost",
    "current_policy",
    "retried",
    "retry",
    "retry_policy",
    "transaction",
    "transient",
    "within",
]

log = logging.getLogger("codemojex.wallet")

P = ParamSpec("P")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How long a wallet call keeps trying: until ``deadline_s`` after its first
    attempt, sleeping ``first_delay_s`` doubling up to ``max_delay_s`` (jittered)."""

    deadline_s: float = 30.0
    first_delay_s: float = 0.02
    max_delay_s: float = 1.0
    checkout_s: float = 5.0  # one attempt waits at most this long for a pooled connection

    def __post_init__(self) -> None:
        if not (self.deadline_s >= 0 and 0 < self.first_delay_s <= self.max_delay_s and self.checkout_s > 0):
            raise ConfigurationError(
                "RetryPolicy: deadline_s >= 0, 0 < first_delay_s <= max_delay_s, checkout_s > 0")


DEFAULT_POLICY = RetryPolicy()
_policy: ContextVar[RetryPolicy] = ContextVar("codemojex_retry_policy", default=DEFAULT_POLICY)
_deadline: ContextVar[float | None] = ContextVar("codemojex_retry_deadline", default=None)


def current_policy() -> RetryPolicy:
    """The retry policy wallet calls use in this context."""
    return _policy.get()


@contextlib.contextmanager
def retry_policy(policy: RetryPolicy) -> Iterator[RetryPolicy]:
    """Use ``policy`` for wallet calls made in this context (tasks started inside inherit it)."""
    token = _policy.set(policy)
    try:
        yield policy
    finally:
        _policy.reset(token)


@contextlib.contextmanager
def within(seconds: float | None = None) -> Iterator[float]:
    """Bound every wallet call (and its retries) made in this context by one deadline,
    ``seconds`` from now (default: the policy's ``deadline_s``); nested bounds only shrink.
    Yields the deadline (``time.monotonic()`` clock)."""
    span = _policy.get().deadline_s if seconds is None else seconds
    deadline = time.monotonic() + span
    outer = _deadline.get()
    if outer is not None:
        deadline = min(deadline, outer)
    token = _deadline.set(deadline)
    try:
        yield deadline
    finally:
        _deadline.reset(token)


class RetryStats:
    """Process-wide counts of transient failures seen, by SQLSTATE (or class name)."""

    def __init__(self) -> None:
        self.failures: Counter[str] = Counter()
        self.gave_up = 0

    def record(self, exc: BaseException) -> None:
        code = getattr(exc, "sqlstate", None)
        self.failures[code or type(exc).__name__] += 1

    @property
    def deadlocks(self) -> int:
        return self.failures["40P01"]

    @property
    def serialization_failures(self) -> int:
        return self.failures["40001"]


STATS = RetryStats()


def transient(exc: BaseException) -> bool:
    """True for a failure a later attempt can outlive (see the module docstring)."""
    return isinstance(exc, psycopg.OperationalError) and not isinstance(exc, PoolClosed)


def connection_lost(exc: BaseException) -> bool:
    """True when the failure says a connection (or the server) is gone, not that a
    transaction lost a race (deadlock, serialization failure, a lock or statement timeout)."""
    if not transient(exc) or isinstance(exc, PoolTimeout):
        return False
    code = getattr(exc, "sqlstate", None)
    return code is None or code.startswith(("08", "57P"))


async def retry(
    call: Callable[[], Awaitable[T]],
    *,
    what: str,
    policy: RetryPolicy | None = None,
    pool: AsyncConnectionPool | None = None,
) -> T:
    """Await ``call()``; on a transient failure call it again until the deadline.

    When a connection was lost and ``pool`` is given, the pool checks its idle
    connections first (broken ones are replaced) so the retry does not draw another
    dead one. Raises :class:`Unavailable` past the deadline and :class:`DatabaseError`
    for a non-transient ``psycopg`` error; other exceptions pass through unchanged.
    """
    policy = policy or _policy.get()
    outer = _deadline.get()
    deadline = time.monotonic() + policy.deadline_s
    if outer is not None:  # nested: the outermost call's deadline bounds everything
        deadline = min(deadline, outer)
    token = _deadline.set(deadline)
    delays = BackoffDelays(policy.first_delay_s, policy.max_delay_s, jitter=(0.5, 1.0))
    try:
        while True:
            try:
                return await call()
            except psycopg.Error as exc:
                if not transient(exc):
                    raise DatabaseError(f"{what}: {type(exc).__name__}: {exc}") from exc
                STATS.record(exc)
                pause = next(delays)
                if time.monotonic() + pause >= deadline:
                    STATS.gave_up += 1
                    raise Unavailable(f"{what}: PostgreSQL unavailable: {type(exc).__name__}: {exc}") from exc
                log.info("%s: transient %s (%s); retrying in %.0f ms", what, type(exc).__name__,
                         str(exc).strip()[:120], pause * 1000)
                if pool is not None and connection_lost(exc):
                    with contextlib.suppress(psycopg.Error):
                        await pool.check()
                await asyncio.sleep(pause)
    finally:
        _deadline.reset(token)


def retried(fn: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """Decorate a wallet call: every call runs under :func:`retry`."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        pool = args[0] if args and isinstance(args[0], AsyncConnectionPool) else None
        return await retry(lambda: fn(*args, **kwargs), what=fn.__name__, pool=pool)

    return wrapper


def _checkout_timeout(pool: AsyncConnectionPool) -> float:
    """Short checkouts: after a restart a fresh checkout starts a fresh connection attempt,
    where a long wait would sit out the pool's reconnection back-off."""
    deadline = _deadline.get()
    if deadline is None:
        return pool.timeout
    return max(0.01, min(pool.timeout, _policy.get().checkout_s, deadline - time.monotonic()))


@contextlib.asynccontextmanager
async def transaction(
    pool: AsyncConnectionPool,
    *,
    isolation: Literal["READ COMMITTED", "REPEATABLE READ"] = "READ COMMITTED",
    read_only: bool = False,
    pipelined: bool = False,
) -> AsyncIterator[Conn]:
    """One transaction on a pooled connection, its isolation level set explicitly
    (``BEGIN ISOLATION LEVEL …``: no extra round trip), restored to the server's
    defaults before the connection goes back to the pool.

    ``pipelined``: the transaction runs inside psycopg's pipeline mode, entered before
    ``BEGIN``, so ``BEGIN`` goes out with the first statements and ``COMMIT`` with the
    last ones: a round trip only where the caller reads a result (a batch of reads, then
    its writes and the commit: two, where ``BEGIN`` and ``COMMIT`` alone cost two more).
    An error of a statement or of the ``COMMIT`` is raised when the pipeline syncs, at the
    latest on leaving this block; the transaction is rolled back, as without a pipeline.

    The checkout waits no longer than the enclosing retry's deadline."""
    async with pool.connection(timeout=_checkout_timeout(pool)) as conn:
        await conn.set_isolation_level(_LEVELS[isolation])  # idle: stored, sent with BEGIN
        await conn.set_read_only(read_only or None)
        try:
            if pipelined:
                async with conn.pipeline(), conn.transaction():
                    yield conn
            else:
                async with conn.transaction():
                    yield conn
        finally:
            with contextlib.suppress(psycopg.Error):  # a broken connection is discarded anyway
                await conn.set_isolation_level(None)
                await conn.set_read_only(None)


_LEVELS = {
    "READ COMMITTED": psycopg.IsolationLevel.READ_COMMITTED,
    "REPEATABLE READ": psycopg.IsolationLevel.REPEATABLE_READ,
}
