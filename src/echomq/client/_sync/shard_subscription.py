# Generated from echomq/client/_async/shard_subscription.py by scripts/unasync_gen.py. Do not edit.
"""A sharded wake subscription on a cluster: ``SSUBSCRIBE`` on the primary that owns the
channel's slot (used by :class:`echomq.client._sync.cluster.ClusterConnector`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from echomq.client import _edge
from echomq.core.errors import ServerUnavailable

__all__ = ["ShardSubscription"]


class ShardSubscription:
    """``SSUBSCRIBE`` on the primary that owns the channel's slot. When the slot leaves
    that node (failover, resharding) the server ends the subscription: ``get_message``
    then raises, and the caller subscribes again through the connector."""

    def __init__(self, pubsub: Any, on_lost: Callable[[], None]) -> None:
        self.pubsub = pubsub
        self._on_lost = on_lost

    def get_message(self, ignore_subscribe_messages: bool = True, **wait: Any) -> Any:
        """As redis-py's ``get_message`` (``timeout=`` seconds to wait for a message)."""
        with _edge.mapped():
            try:
                msg = self.pubsub.get_message(ignore_subscribe_messages=False, **wait)
            except Exception:
                self._on_lost()
                raise
            if msg is None:
                return None
            if msg["type"] == "sunsubscribe":
                self._on_lost()
                raise ServerUnavailable("the wake channel's slot left this node")
            if ignore_subscribe_messages and msg["type"] == "ssubscribe":
                return None
            return msg

    def lost(self) -> None:
        """The subscription failed (read by its new owner, echomq.runtime.wake_link): look the
        slot's node up again before the next one."""
        self._on_lost()

    def close(self) -> None:
        with _edge.mapped():
            self.pubsub.close()
