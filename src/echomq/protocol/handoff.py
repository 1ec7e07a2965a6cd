"""Hand-off on admission: an idle consumer parks, the admission leases it the job.

Pure builders and decoders (no I/O), like :mod:`echomq.protocol`. See
docs/decisions/0018-hand-off.md and the scripts ``lua/park.lua`` and
``lua/include/handoff.lua`` (run inside ``lua/enqueue.lua``).

* A consumer whose last flush found pending empty calls ``park`` with its token and its
  lease length; the registration lives ``ttl_ms`` on the server clock and is renewed every
  idle beat, withdrawn at stop.
* ``enqueue`` on an empty pending set with a live registration leases the job to that
  consumer in the same step (row active, attempt 1, lease on ``active``) and publishes
  ``EMQH|<token>|<id>|<attempt>|<deadline>|<payload>`` on the wake channel; the consumer
  starts the handler from the message alone: no round trip between admission and handler.
* The hand-off is an ordinary lease: heartbeats renew it, ``complete``/``retry`` are
  fenced by its attempt, and if the consumer died (or the message was lost) the lease
  expires and ``reap`` re-exposes the job.
"""

from __future__ import annotations

import re
import secrets

from echomq.core.bounds import MAX_LEASE_MS, check_int
from echomq.core.errors import InvalidArgument
from echomq.core.model import Lease, new_lease
from echomq.protocol.calls import Call, layout
from echomq.protocol.keyspace import QueueKeys

__all__ = ["decode_handoff", "new_token", "park"]

_PARK = layout("park", ("pending", "parked", "meta"), ("token", "lease_ms", "ttl_ms"))
_TOKEN = re.compile(r"[0-9A-Za-z_.@-]{1,64}")


def new_token() -> str:
    """A consumer's hand-off token: 128 random bits, unique per consumer instance."""
    return secrets.token_hex(16)


def park(k: QueueKeys, token: str, *, lease_ms: int, ttl_ms: int) -> Call:
    """Register (``ttl_ms`` > 0) or withdraw (0) a parked consumer for hand-off."""
    if not isinstance(token, str) or not _TOKEN.fullmatch(token):
        raise InvalidArgument(f"token must be 1..64 of [0-9A-Za-z_.@-], not {token!r}")
    check_int("lease_ms", lease_ms, 1, MAX_LEASE_MS)
    check_int("ttl_ms", ttl_ms, 0, MAX_LEASE_MS)
    return Call(_PARK, [k.pending, k.parked, k.meta], [token, lease_ms, ttl_ms])


def decode_handoff(queue: str, token: str, message: bytes) -> Lease | None:
    """The lease in a hand-off wake message meant for ``token``, else None.

    The payload is the message's last field, so it may hold any byte (``|`` included).
    """
    if not message.startswith(b"EMQH|"):
        return None
    parts = message.split(b"|", 5)
    if len(parts) != 6 or parts[1] != token.encode():
        return None
    try:
        return new_lease(queue, parts[2].decode(), int(parts[3]), parts[5], None, int(parts[4]),
                         None)
    except ValueError:
        return None
