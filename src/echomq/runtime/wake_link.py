"""A consumer's wake channel read inline, not through redis-py's PubSub polling.

The subscription is made as before (``AsyncQueue.wake_subscription``: ``SSUBSCRIBE`` on
the node owning the channel's slot, with every connection option of the connector: TLS,
ACL user, unix socket). Then :func:`attach` takes the subscribed connection's transport
over with a small protocol: each chunk read is parsed by ``hiredis`` and every message is
handed to the consumer's callback in the same event-loop step that read it. No task waits
on ``get_message`` with a poll timeout, no stream reader, no timeout context per message:
that path cost ~0.3 ms per wake-up on this machine (bench/latency_probe.py, stage
``recv``), a fifth of the idle admission-to-handler latency
(docs/decisions/0026-wake-link.md).

The link ends when the connection drops, the server ends the subscription (the slot left
the node: ``sunsubscribe``) or answers an error; :attr:`WakeLink.closed` then holds the
reason and the consumer subscribes again. It is ``ready`` once the server confirmed the
subscription, so a consumer parks (asks for hand-offs) only while it can hear them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import hiredis

from echomq.client._async.seam import WakeSubscription
from echomq.core.errors import ServerUnavailable

__all__ = ["WakeLink", "attach", "listen"]

RESUBSCRIBE_S = 0.2  # after a lost link, before subscribing again


class WakeLink(asyncio.Protocol):
    """The protocol on a subscribed connection: ``on_message(data)`` per message, inline."""

    def __init__(self, on_message: Callable[[bytes], object],
                 on_ready: Callable[[], object] | None = None) -> None:
        self._parser = hiredis.Reader()
        self._on_message = on_message
        self._on_ready = on_ready
        self.ready = False  # the server confirmed the subscription
        self.closed: asyncio.Future[BaseException] = asyncio.get_running_loop().create_future()
        self.transport: asyncio.BaseTransport | None = None

    def data_received(self, data: bytes) -> None:
        parser = self._parser
        try:
            parser.feed(data)
            while (reply := parser.gets()) is not False:
                self._reply(reply)
        except Exception as exc:  # a protocol error, or the consumer's callback failed
            self._end(exc)

    def _reply(self, reply: Any) -> None:
        if isinstance(reply, hiredis.ReplyError):
            self._end(ServerUnavailable(f"the wake subscription was refused: {reply}"))
            return
        if not isinstance(reply, list) or len(reply) < 3:
            return  # nothing a shard subscription sends to us (a pong, say)
        kind = reply[0]
        if kind == b"smessage":
            data = reply[2]
            if isinstance(data, bytes):
                self._on_message(data)
        elif kind == b"ssubscribe":
            self.ready = True
            if self._on_ready is not None:
                self._on_ready()
        elif kind == b"sunsubscribe":  # the slot left this node (failover, resharding)
            self._end(ServerUnavailable("the wake channel's slot left this node"))

    def connection_lost(self, exc: Exception | None) -> None:
        self._end(ServerUnavailable(f"the wake connection was lost ({exc!r})"))

    def eof_received(self) -> bool | None:
        self._end(ServerUnavailable("the server closed the wake connection"))
        return None  # let the transport close itself

    def _end(self, reason: BaseException) -> None:
        self.ready = False
        if not self.closed.done():
            self.closed.set_result(reason)
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()


def attach(sub: WakeSubscription, on_message: Callable[[bytes], object],
           on_ready: Callable[[], object] | None = None) -> WakeLink:
    """Take over the connection of a fresh subscription (``SSUBSCRIBE`` sent, its answer
    not read yet) with a :class:`WakeLink`. Bytes redis-py already buffered are parsed
    first. Close the subscription (``sub.aclose()``) to end the link."""
    conn = getattr(getattr(sub, "pubsub", None), "connection", None)
    reader = getattr(conn, "_reader", None)
    writer = getattr(conn, "_writer", None)
    if conn is None or reader is None or writer is None:
        raise ServerUnavailable("the wake subscription has no open connection")
    link = WakeLink(on_message, on_ready)
    # Nothing may be read between these lines (no await): what the stream reader holds is
    # handed to the link, everything after arrives at the link itself.
    buffered: Any = getattr(reader, "_buffer", None)
    pending = bytes(buffered or b"")
    if pending:
        buffered.clear()
    transport = writer.transport
    transport.set_protocol(link)
    link.transport = transport
    if not transport.is_reading():  # paused by the stream reader's flow control
        transport.resume_reading()
    if pending:
        link.data_received(pending)
    return link


async def listen(queue: Any, on_message: Callable[[bytes], object], *,
                 on_ready: Callable[[], object],
                 on_lost: Callable[[BaseException], Awaitable[None]],
                 closed: Callable[[], bool]) -> None:
    """Hear ``queue``'s wake channel until cancelled (or ``closed()``): ``on_ready`` when
    the server confirmed the subscription, ``on_message`` per message, ``on_lost`` when
    the link ends (a dropped connection, a slot moved away, a refusal; awaited before the
    next subscription); then subscribe again after :data:`RESUBSCRIBE_S` (on a cluster,
    on the slot's node found anew)."""
    while not closed():
        sub: WakeSubscription | None = None
        reason: BaseException | None = None
        try:
            sub = await queue.wake_subscription()
            link = attach(sub, on_message, on_ready)
            reason = await link.closed
        except Exception as exc:
            reason = exc
        finally:  # also on cancellation (the consumer stops): the connection is released
            if sub is not None:
                lost = getattr(sub, "lost", None)
                if reason is not None and lost is not None:
                    lost()  # a cluster's slot table is refreshed before the next subscription
                with contextlib.suppress(Exception):  # already gone: nothing to release
                    await sub.aclose()
        await on_lost(reason if reason is not None else ServerUnavailable("the wake link ended"))
        if not closed():
            await asyncio.sleep(RESUBSCRIBE_S)
