"""What a task and the dispatcher need of their app (:class:`echomq.tasks.app.App`), as a
protocol: the app imports them, so they name it only through this."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from echomq.client._async.queue import AsyncQueue
from echomq.client._sync.queue import Queue
from echomq.tasks.serializer import Serializer

__all__ = ["Host"]


class Host(Protocol):
    serializer: Serializer

    @property
    def tasks(self) -> Mapping[str, Any]: ...

    def queue(self, name: str) -> AsyncQueue: ...

    def sync_queue(self, name: str) -> Queue: ...

    def threads(self) -> ThreadPoolExecutor: ...
