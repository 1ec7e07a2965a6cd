"""CLI verbs of the claim gate (docs/decisions/0022-claim-gate.md): ``pause``, ``resume``
and ``limit``. Listed in :mod:`echomq.ops.cli`'s lazy table (loaded when one of them runs), so
``import echomq.ops.cli`` stays light and no import circle forms."""

from __future__ import annotations

from typing import Any

import click

from echomq.client._async.queue import AsyncQueue
from echomq.client._async.sharded import AsyncShardedQueue
from echomq.core.errors import InvalidArgument
from echomq.ops.cli import URL, _checked, _run_on, console
from echomq.protocol.gate import Gate, RateLimit

__all__ = ["describe_gate", "limit", "pause", "resume"]


async def _plain(connector: Any, queue: str) -> AsyncQueue | AsyncShardedQueue:
    """The queue ``queue``: a sharded one as one queue (its gate acts on every shard and
    its rate limit holds for all of them together, docs/decisions/0031-sharded-gate.md)."""
    return await _checked(connector, queue)


def describe_gate(queue: str, gate: Gate) -> str:
    """One line: ``cm.notify: running; rate 30/1100ms; per lane 1/1100ms``."""
    parts = [f"{queue}: {'paused (claims stop; admissions go on)' if gate.paused else 'running'}"]
    for label, limit in (("rate", gate.rate), ("per lane", gate.lane_rate)):
        parts.append(f"{label} {limit.max}/{limit.per_ms}ms" if limit else f"{label} unlimited")
    return "; ".join(parts)


@click.command()
@click.argument("queue")
@URL
def pause(queue: str, url: str | None) -> None:
    """Stop claims on QUEUE (every consumer); admissions go on."""
    async def go(connector: Any) -> Gate:
        return await (await _plain(connector, queue)).pause()

    console.print(describe_gate(queue, _run_on(url, go)))


@click.command()
@click.argument("queue")
@URL
def resume(queue: str, url: str | None) -> None:
    """Let claims on QUEUE go on (parked consumers are woken)."""
    async def go(connector: Any) -> Gate:
        return await (await _plain(connector, queue)).resume()

    console.print(describe_gate(queue, _run_on(url, go)))


def _rate(text: str | None) -> RateLimit | None:
    if text is None:
        return None
    try:
        return RateLimit.parse(text)
    except InvalidArgument as exc:
        raise click.BadParameter(str(exc)) from None


@click.command()
@click.argument("queue")
@URL
@click.option("--rate", default=None, help="leases per window for the queue, e.g. 30/1s")
@click.option("--lane-rate", default=None, help="leases per window for one lane, e.g. 1/1100ms")
@click.option("--clear", is_flag=True, help="remove both limits")
def limit(queue: str, url: str | None, rate: str | None, lane_rate: str | None, clear: bool) -> None:
    """Show or set QUEUE's rate limits (server clock, every consumer). A limit not given
    is removed when the other is set; with no option, only show them."""
    q_rate, l_rate = _rate(rate), _rate(lane_rate)
    if clear and (q_rate or l_rate):
        raise click.UsageError("--clear takes no --rate or --lane-rate")

    async def go(connector: Any) -> Gate:
        q = await _plain(connector, queue)
        if not clear and q_rate is None and l_rate is None:
            return await q.gate()
        return await q.set_limits(rate=q_rate, lane_rate=l_rate)

    console.print(describe_gate(queue, _run_on(url, go)))
