"""A consumer's side of hand-off on admission (docs/decisions/0018-hand-off.md).

The consumer parks when its last flush found pending empty with a slot free; admissions
into the empty queue then lease the job to it and the wake message carries the lease.
This object keeps the consumer's token, when it last parked (the registration lives three
beats on the server clock and is renewed once a beat while idle), and the leases handed
off but not started yet. The consumer starts them; they are ordinary leases.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from echomq.core.model import Lease
from echomq.protocol.handoff import decode_handoff, new_token
from echomq.protocol.scripts import load as load_script

if TYPE_CHECKING:
    from echomq.client._async.queue import AsyncQueue

__all__ = ["Parking"]


REPARK_S = 0.005  # after a hand-off, park again by then if the job has not finished
# What an idle consumer's first jobs run: parking, the peek, a claim, the finish, a beat (of
# one lease, or of several: decision 0055).
FIRST_SCRIPTS = ("park", "peek", "claim", "complete_batch", "heartbeat", "heartbeat_batch")


class Parking:
    def __init__(self, queue: AsyncQueue, *, lease_ms: int, beat_ms: int,
                 kick: asyncio.Event) -> None:
        self.queue = queue
        self._kick = kick  # wakes the consumer's drain loop (which parks)
        self.token = new_token()
        self.lease_ms, self.beat_ms = lease_ms, beat_ms
        self.ttl_ms = 3 * beat_ms  # renewed every beat: a dead consumer's lapses in three
        self.parked_at: float | None = None  # monotonic time of the last park, None if not parked
        self.handoffs: list[Lease] = []  # leased to us by admissions, not started yet
        self.hearing = False  # the wake subscription is confirmed: hand-offs reach us
        self.heard = 0  # hand-offs heard so far (each used a registration up)
        self.links = 0  # wake subscriptions confirmed so far

    async def prepare(self) -> None:
        """``SCRIPT LOAD`` what the first jobs run, at once and before the first flush, so
        neither the first hand-off's finish nor the first claim waits on a NOSCRIPT round
        (scripts are sent EVALSHA-first). Best effort: the connector recovers NOSCRIPT."""
        connector = self.queue.connector
        await asyncio.gather(*(connector.load(load_script(name)) for name in FIRST_SCRIPTS),
                             return_exceptions=True)

    def recent(self) -> bool:
        """Parked within the last beat (so no renewal is due)."""
        at = self.parked_at
        return at is not None and time.monotonic() - at < self.beat_ms / 1000

    def mark(self, parked: bool, heard: int) -> None:
        """Record a park's answer; ``heard`` is :attr:`heard` when it was sent. A hand-off
        heard since may have used this very registration up (the message and the answer
        come on two connections, in either order): then we are not sure to be parked, and
        park again (idempotent) rather than believe it until the next beat's renewal."""
        self.parked_at = time.monotonic() if parked and heard == self.heard else None

    async def park(self, refused: Callable[[BaseException, str], object]) -> bool:
        """Park (or renew) unless done within the last beat; False when pending has work.
        A failure is handed to ``refused`` and ridden out as a poll would be (not parked)."""
        if self.recent():
            return True
        heard = self.heard
        try:
            parked = await self.queue.park(self.token, lease_ms=self.lease_ms, ttl_ms=self.ttl_ms)
        except Exception as exc:
            refused(exc, "parking")
            self.parked_at = None
            return True  # wait for the beat, as an unparked idle consumer does
        self.mark(parked, heard)
        return parked

    async def withdraw(self) -> None:
        """Withdraw the registration at stop (it would lapse within three beats anyway)."""
        if self.parked_at is None:
            return
        self.parked_at = None
        with contextlib.suppress(Exception):  # it lapses by itself within three beats
            await self.queue.park(self.token, lease_ms=self.lease_ms, ttl_ms=0)

    def ready(self, *, parks: bool) -> None:
        """The wake subscription is confirmed: the drain loop parks now (``parks``), and
        after a drop looks at pending (a message may have been missed meanwhile)."""
        self.hearing = True
        self.links += 1
        if parks or self.links > 1:
            self._kick.set()

    def repark_soon(self) -> None:
        """A hand-off used the registration up. The flush of the job's finish parks again;
        if the job runs longer than :data:`REPARK_S`, the drain loop parks then."""
        asyncio.get_running_loop().call_later(REPARK_S, self._repark)

    def _repark(self) -> None:
        if self.parked_at is None:
            self._kick.set()

    async def deaf(self, within_s: float) -> None:
        """The wake subscription is lost: no parking until it is back, and the live
        registration is withdrawn (waited for up to ``within_s``, before subscribing
        again), so no admission leases a job to a consumer that cannot hear of it. A
        hand-off sent before that ends like any unheard one: its lease expires and reap
        re-exposes it."""
        self.hearing = False
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.withdraw(), within_s)

    def message(self, data: bytes) -> bool | None:
        """A wake message: True for a hand-off to us (kept for the consumer to start), False
        for another consumer's (nothing to wake for), None when it is no hand-off."""
        if not data.startswith(b"EMQH|"):
            return None
        lease = decode_handoff(self.queue.name, self.token, data)
        if lease is None:
            return False
        self.parked_at = None  # the admission used up the registration
        self.heard += 1
        self.handoffs.append(lease)
        return True

    def take(self) -> list[Lease]:
        taken, self.handoffs = self.handoffs, []
        return taken
