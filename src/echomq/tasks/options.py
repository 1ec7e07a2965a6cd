"""What a task is declared with, checked before any job exists: its admission options
(:class:`AdmitOptions`, ``task.options(...)`` replaces some for one call), one checked
call (:class:`TaskCall`, an item of ``admit_many``), its name, the exception types of its
retry policy, and the functions that read a job's lane and business key from a call's
arguments. Pure: no I/O. :class:`~echomq.tasks.task.Task` is built from these; the names
are also ``echomq.tasks.task``'s and the tasks facade's (``echomq.tasks.AdmitOptions``).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from echomq.core import bounds
from echomq.core.errors import InvalidArgument
from echomq.protocol import check_window
from echomq.protocol.gate import check_priority

__all__ = ["KEY_WINDOW_MS", "AdmitOptions", "ArgFn", "ArgOf", "Errors", "TaskCall", "arg_of",
           "check_name", "exception_types", "module_of"]

KEY_WINDOW_MS = 3_600_000
"""How long a task's ``key=`` refuses a second job by default: one hour from admission,
what the row's retention (``keep_done_ms``) gave before (docs/decisions/0043)."""

NAME = re.compile(r"[A-Za-z0-9_.:<>\-]{1,200}")
ArgFn = str | Callable[..., Any] | None
Errors = tuple[type[BaseException], ...]
ArgOf = Callable[[tuple[Any, ...], dict[str, Any], list[Any]], str | None]  # (args, kwargs, values)


@dataclass(frozen=True, slots=True, kw_only=True)
class AdmitOptions:
    """How a task's jobs are admitted (``task.options(...)`` replaces some for one call)."""

    lane: ArgFn = None
    serial: bool = False
    priority: int = 0
    max_attempts: int | None = None
    timeout_ms: int | None = None
    delay_ms: int = 0
    key: ArgFn = None
    dedupe_ms: int | None = None  # a keyed job's window (None: KEY_WINDOW_MS)
    dedupe_mode: str | None = None  # "throttle" (None) or "debounce"
    expires_ms: int | None = None  # a deadline to start by (decision 0045)

    def __post_init__(self) -> None:
        if (self.dedupe_ms is not None or self.dedupe_mode is not None) and self.key is None:
            raise InvalidArgument("dedupe_ms and dedupe_mode need key= (the dedupe key)")
        check_window(KEY_WINDOW_MS if self.dedupe_ms is None else self.dedupe_ms, None,
                     self.dedupe_mode)
        check_priority(self.priority)
        bounds.check_int("delay_ms", self.delay_ms, 0, bounds.MAX_DELAY_MS)
        bounds.check_expiry(self.expires_ms, self.delay_ms)
        if self.max_attempts is not None:
            bounds.check_int("max_attempts", self.max_attempts, 1, bounds.MAX_ATTEMPTS)
        if self.timeout_ms is not None:
            bounds.check_int("timeout_ms", self.timeout_ms, 1, bounds.MAX_DELAY_MS)
        if not isinstance(self.serial, bool):
            raise InvalidArgument(f"serial must be a bool, not {type(self.serial).__name__}")
        for what in ("lane", "key"):
            value = getattr(self, what)
            if value is not None and not isinstance(value, str) and not callable(value):
                raise InvalidArgument(f"{what} must be a parameter's name or a function of the arguments")


@dataclass(frozen=True, slots=True)
class TaskCall:
    """One call of a task, its arguments bound and checked (``task.call(...)``): an item
    of ``admit_many``."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]


def module_of(fn: Callable[..., Any]) -> str:
    """The module a task's default name starts with. A function of the script being run
    (``__main__``) is named after the script's module (``python hello.py`` and ``echomq
    worker hello:app`` then agree on ``hello.bill``), as Celery does."""
    module = getattr(fn, "__module__", None) or "__main__"
    if module != "__main__":
        return module
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name:
        return str(spec.name)
    file = getattr(main, "__file__", None)
    return Path(file).stem if file else module


def exception_types(what: str, value: Any) -> Errors:
    """``retry_on`` / ``give_up_on`` as a tuple of exception types (None: none)."""
    if value is None:
        return ()
    if isinstance(value, type):
        value = (value,)
    if not isinstance(value, Sequence) or not all(
            isinstance(x, type) and issubclass(x, BaseException) for x in value):
        raise InvalidArgument(f"{what} must be an exception type or a tuple of them")
    return tuple(value)


def check_name(name: object) -> str:
    """A task's name as it travels with its jobs: 1..200 of ``[A-Za-z0-9_.:<>-]``."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise InvalidArgument(f"a task name is 1..200 of [A-Za-z0-9_.:<>-], not {name!r}")
    return name


def arg_of(task: str, names: Sequence[str], what: str, value: ArgFn) -> ArgOf | None:
    """How task ``task`` reads ``what`` (its ``lane`` or ``key``) from a call: ``value`` is a
    parameter's name (one of ``names``: its value as a str, None stays None), a function of
    the call's arguments (it must answer a str or None), or None (no ``what``)."""
    if value is None:
        return None
    if isinstance(value, str):
        if value not in names:
            raise InvalidArgument(f"task {task}: {what}={value!r} names no parameter")
        at = list(names).index(value)
        return lambda args, kwargs, values: None if values[at] is None else str(values[at])
    fn = value

    def call(args: tuple[Any, ...], kwargs: dict[str, Any], values: list[Any]) -> str | None:
        got = fn(*args, **kwargs)
        if got is not None and not isinstance(got, str):
            raise InvalidArgument(f"task {task}: {what} gave {got!r}, not a str or None")
        return got
    return call
