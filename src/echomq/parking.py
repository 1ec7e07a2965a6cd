"""A consumer's side of hand-off on admission (docs/decisions/0018-hand-off.md).

The consumer parks when its last flush found pending empty with a slot free; admissions
into the empty queue then lease the job to it and the wake message carries the lease.
This object keeps the consumer's token, when it last parked (the registration lives three
beats on the server clock and is renewed once a beat while idle), and the leases handed
off but not started yet. The consumer starts them; they are ordinary leases.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from echomq.handoff import decode_handoff, new_token
from echomq.model import Lease

if TYPE_CHECKING:
    from echomq._async.queue import AsyncQueue

__all__ = ["Parking"]


class Parking:
    def __init__(self, queue: AsyncQueue, *, lease_ms: int, beat_ms: int) -> None:
        self.queue = queue
        self.token = new_token()
        self.lease_ms, self.beat_ms = lease_ms, beat_ms
        self.ttl_ms = 3 * beat_ms  # renewed every beat: a dead consumer's lapses in three
        self.parked_at: float | None = None  # monotonic time of the last park, None if not parked
        self.handoffs: list[Lease] = []  # leased to us by admissions, not started yet

    def recent(self) -> bool:
        """Parked within the last beat (so no renewal is due)."""
        at = self.parked_at
        return at is not None and time.monotonic() - at < self.beat_ms / 1000

    def mark(self, parked: bool) -> None:
        self.parked_at = time.monotonic() if parked else None

    async def park(self, refused: Callable[[BaseException, str], object]) -> bool:
        """Park (or renew) unless done within the last beat; False when pending has work.
        A failure is handed to ``refused`` and ridden out as a poll would be (not parked)."""
        if self.recent():
            return True
        try:
            parked = await self.queue.park(self.token, lease_ms=self.lease_ms, ttl_ms=self.ttl_ms)
        except Exception as exc:
            refused(exc, "parking")
            self.parked_at = None
            return True  # wait for the beat, as an unparked idle consumer does
        self.mark(parked)
        return parked

    async def withdraw(self) -> None:
        """Withdraw the registration at stop (it would lapse within three beats anyway)."""
        if self.parked_at is None:
            return
        self.parked_at = None
        with contextlib.suppress(Exception):  # it lapses by itself within three beats
            await self.queue.park(self.token, lease_ms=self.lease_ms, ttl_ms=0)

    def message(self, data: bytes) -> bool | None:
        """A wake message: True for a hand-off to us (kept for the consumer to start), False
        for another consumer's (nothing to wake for), None when it is no hand-off."""
        if not data.startswith(b"EMQH|"):
            return None
        lease = decode_handoff(self.queue.name, self.token, data)
        if lease is None:
            return False
        self.parked_at = None  # the admission used up the registration
        self.handoffs.append(lease)
        return True

    def take(self) -> list[Lease]:
        taken, self.handoffs = self.handoffs, []
        return taken
