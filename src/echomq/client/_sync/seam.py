# Generated from echomq/client/_async/seam.py by scripts/unasync_gen.py. Do not edit.
"""The connector seam: what a queue, its upkeep and a consumer need of a connector.

:class:`~echomq.Connector` (one server) and :class:`~echomq.ClusterConnector`
(a cluster) both implement :class:`ScriptConnector`; the queue is typed against it, never
against either class, so a third connector (a test's recorder, say) needs only these
methods. A reply is a :data:`Reply`: the server's raw value, with an error reply in its
place as its :class:`~echomq.core.errors.EchoMQError` inside a pipeline (raised when alone).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeAlias, runtime_checkable

from echomq.core.errors import EchoMQError
from echomq.protocol.calls import Call
from echomq.protocol.scripts import Script

__all__ = ["Arg", "Message", "Read", "Reply", "ScriptConnector", "WakeSubscription"]

Arg: TypeAlias = str | bytes | int | float
"""One word of a command or of a script's KEYS/ARGV."""

Reply: TypeAlias = "bytes | int | float | str | list[Reply] | EchoMQError | None"
"""A raw reply: bulk string, integer, double, status, nil, array, or an error in place."""

Read: TypeAlias = Call | Sequence[Arg]
"""A plain command (``("ZRANGE", key, 0, 9)``) or a call of a ``no-writes`` script sent
after the script calls of a flush; reads are sent again with every NOSCRIPT round."""

Message: TypeAlias = dict[str, object]
"""One message of a subscription (``type``, ``channel``, ``data``), as redis-py gives it."""


@runtime_checkable
class WakeSubscription(Protocol):
    """A subscription to a queue's wake channel (on a cluster, on the channel's node)."""

    def get_message(self, ignore_subscribe_messages: bool = True,
                          **wait: float) -> Message | None:
        """The next message, waiting up to ``timeout=`` seconds; None if none came."""

    def close(self) -> None: ...


@runtime_checkable
class ScriptConnector(Protocol):
    """Scripts EVALSHA-first, pipelines, plain commands, with one retry budget."""

    def command(self, *args: Arg) -> Reply: ...

    def load(self, script: Script) -> None: ...

    def eval(self, script: Script, keys: Sequence[str | bytes],
                   args: Sequence[Arg]) -> Reply: ...

    def run(self, call: Call) -> Reply: ...

    def pipeline(self, calls: Sequence[Call], *, flush: int | None = None) -> list[Reply]: ...

    def flush(self, calls: Sequence[Call], reads: Sequence[Read] = ()) -> list[Reply]: ...

    def pipeline_wait(self, calls: Sequence[Call], *, replicas: int,
                            timeout_ms: int) -> tuple[list[Reply], list[int]]: ...

    def server_time_ms(self) -> int: ...

    def wake_subscription(self, channel: str) -> WakeSubscription: ...

    def close(self) -> None: ...
