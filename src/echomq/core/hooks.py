"""Hooks around a consumer's handler, for logging, metrics and tracing.

``Hooks(before=[...], after=[...], on_failure=[...], finished=[...])``; each hook is a
plain function or an ``async def`` (awaited), called in the handler's own task:

=============  =====================================  ==========================================
hook           called with                            when
=============  =====================================  ==========================================
``before``     ``(lease)``                            before the handler (a context it sets,
                                                      e.g. a span, is the handler's context)
``on_failure`` ``(lease, error, seconds)``            the handler raised, or ran past its
                                                      timeout (``HandlerTimeout``)
``after``      ``(lease, outcome, seconds)``          the handler is done: the outcome about to
                                                      be written (a failure is a ``Backoff``)
``finished``   ``(lease, outcome, began, ended)``     the outcome was written (wall-clock times)
=============  =====================================  ==========================================

Not called for an attempt whose lease was lost or that was cancelled at shutdown (its
outcome is discarded: the job runs again). A hook that raises is logged with its
traceback and changes nothing: the job's outcome is the handler's, and the other hooks
still run. Hooks run in order; :meth:`Hooks.then` joins two sets (the worker's own
metrics and tracing hooks come first, the settings' hooks after).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from echomq.core.errors import InvalidArgument
from echomq.core.model import Lease
from echomq.core.outcomes import Outcome

__all__ = ["AfterHook", "BeforeHook", "FailureHook", "FinishedHook", "Hooks"]

log = logging.getLogger("echomq.core.hooks")

BeforeHook = Callable[[Lease], Awaitable[None] | None]
AfterHook = Callable[[Lease, Outcome, float], Awaitable[None] | None]
FailureHook = Callable[[Lease, BaseException, float], Awaitable[None] | None]
FinishedHook = Callable[[Lease, Outcome, float, float], Awaitable[None] | None]


@dataclass(frozen=True, slots=True, kw_only=True)
class Hooks:
    """The hooks of one consumer (see the module's table). Immutable; join with ``then``."""

    before: Sequence[BeforeHook] = ()
    after: Sequence[AfterHook] = ()
    on_failure: Sequence[FailureHook] = ()
    finished: Sequence[FinishedHook] = ()

    def __post_init__(self) -> None:
        for name in ("before", "after", "on_failure", "finished"):
            value = getattr(self, name)
            if callable(value):
                value = (value,)  # one hook given bare
            if not isinstance(value, Sequence) or isinstance(value, str | bytes):
                raise InvalidArgument(f"hooks {name} must be a sequence of callables")
            for hook in value:
                if not callable(hook):
                    raise InvalidArgument(f"a {name} hook is not callable: {hook!r}")
            object.__setattr__(self, name, tuple(value))

    def then(self, other: Hooks | None) -> Hooks:
        """These hooks, then ``other``'s, at every point."""
        if other is None:
            return self
        return Hooks(before=(*self.before, *other.before), after=(*self.after, *other.after),
                     on_failure=(*self.on_failure, *other.on_failure),
                     finished=(*self.finished, *other.finished))

    def __bool__(self) -> bool:
        return bool(self.before or self.after or self.on_failure or self.finished)

    async def run_before(self, lease: Lease) -> None:
        await _each(self.before, "before", lease)

    async def run_after(self, lease: Lease, outcome: Outcome, seconds: float) -> None:
        await _each(self.after, "after", lease, outcome, seconds)

    async def run_failure(self, lease: Lease, error: BaseException, seconds: float) -> None:
        await _each(self.on_failure, "on_failure", lease, error, seconds)

    async def run_finished(self, lease: Lease, outcome: Outcome, began: float, ended: float) -> None:
        await _each(self.finished, "finished", lease, outcome, began, ended)


async def _each(hooks: Sequence[Callable[..., Any]], point: str, lease: Lease, *args: Any) -> None:
    for hook in hooks:
        try:
            result = hook(lease, *args)
            if inspect.isawaitable(result):
                await result
        except Exception as exc:  # a hook never changes the job's outcome
            log.error("%s hook %s failed for job %s (attempt %d); the job's outcome is unchanged",
                      point, getattr(hook, "__qualname__", hook), lease.id, lease.attempt, exc_info=exc)
