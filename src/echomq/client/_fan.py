"""Run one call per shard: concurrently for the asyncio API, one after another for the
blocking one. The generator (scripts/unasync_gen.py) turns ``fan_out_async`` into
``fan_out`` and ``fan_out_each_async`` into ``fan_out_each``."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from echomq.core.errors import EchoMQError

__all__ = ["fan_out", "fan_out_async", "fan_out_each", "fan_out_each_async"]

T = TypeVar("T")


async def fan_out_each_async(
    thunks: Sequence[Callable[[], Awaitable[T]]],
) -> list[T | EchoMQError]:
    """Every call's result, or its EchoMQError, in order (all run to the end)."""
    got = await asyncio.gather(*(t() for t in thunks), return_exceptions=True)
    for r in got:
        if isinstance(r, BaseException) and not isinstance(r, EchoMQError):
            raise r
    return list(got)  # type: ignore[arg-type]


async def fan_out_async(thunks: Sequence[Callable[[], Awaitable[T]]]) -> list[T]:
    """Every call's result in order; the first EchoMQError once all have ended."""
    got = await fan_out_each_async(thunks)
    for r in got:
        if isinstance(r, EchoMQError):
            raise r
    return got  # type: ignore[return-value]


def fan_out_each(thunks: Sequence[Callable[[], T]]) -> list[T | EchoMQError]:
    out: list[T | EchoMQError] = []
    for t in thunks:
        try:
            out.append(t())
        except EchoMQError as exc:
            out.append(exc)
    return out


def fan_out(thunks: Sequence[Callable[[], T]]) -> list[T]:
    return [t() for t in thunks]
