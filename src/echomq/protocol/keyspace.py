"""Keys, hash tags and cluster slots (docs/protocol.md, "Keys of queue q"). Pure: no I/O.

Every key of queue ``q`` is ``emq:{q}:<type>``, so all of a queue's keys share
one hash tag and therefore one cluster slot: a script over any of them is
single-slot and legal on a cluster.
"""

from __future__ import annotations

from dataclasses import dataclass

from echomq.core import ids
from echomq.core.errors import InvalidArgument, InvalidJobId, InvalidQueueName

__all__ = ["MAX_QUEUE_NAME", "PREFIX", "SLOTS", "STATES", "QueueKeys", "check_queue", "crc16",
           "hash_tag", "job_key", "queue_key", "slot"]

PREFIX = "emq"
# Long enough for any sensible name; short enough that a key stays a few dozen bytes.
MAX_QUEUE_NAME = 128
SLOTS = 16384  # the cluster's slot count (CRC16 mod 16384); defined here only
STATES = ("pending", "active", "delayed", "done", "dead", "expired")


def check_queue(queue: str) -> str:
    """Return ``queue`` if it is a legal queue name, else raise :class:`InvalidQueueName`.

    A legal name is 1..128 characters of printable text (no control characters,
    no whitespace other than a plain space inside) and holds neither ``{`` nor
    ``}``, so ``emq:{<name>}:...`` always hashes exactly ``<name>``.
    """
    if not isinstance(queue, str):
        raise InvalidQueueName(f"queue name must be str, not {type(queue).__name__}")
    if not queue:
        raise InvalidQueueName("queue name is empty")
    if len(queue) > MAX_QUEUE_NAME:
        raise InvalidQueueName(f"queue name longer than {MAX_QUEUE_NAME} characters")
    if "{" in queue or "}" in queue:
        raise InvalidQueueName(f"queue name {queue!r} holds a brace, which would change its hash tag")
    if queue != queue.strip():
        raise InvalidQueueName(f"queue name {queue!r} has leading or trailing whitespace")
    for ch in queue:
        if not ch.isprintable():
            raise InvalidQueueName(f"queue name {queue!r} holds a control character")
    return queue


def queue_key(queue: str, type_: str) -> str:
    """``emq:{<queue>}:<type>``: the key of one of the queue's structures."""
    return f"{PREFIX}:{{{check_queue(queue)}}}:{type_}"


def job_key(queue: str, job_id: str) -> str:
    """``emq:{<queue>}:job:<id>``, refusing an id that is not a valid branded id."""
    if not ids.valid(job_id):
        raise InvalidJobId(f"not a branded id: {job_id!r}")
    return queue_key(queue, "job:" + job_id)


def hash_tag(key: str | bytes) -> bytes:
    """The part of ``key`` that a cluster hashes: the first non-empty ``{...}``, else all of it."""
    raw = key.encode() if isinstance(key, str) else key
    start = raw.find(b"{")
    if start != -1:
        end = raw.find(b"}", start + 1)
        if end > start + 1:
            return raw[start + 1 : end]
    return raw


def _table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
        table.append(crc & 0xFFFF)
    return table


_CRC_TABLE = _table()


def crc16(data: bytes) -> int:
    """CRC16-XMODEM (polynomial 0x1021, initial 0), the checksum the cluster uses."""
    crc = 0
    for byte in data:
        crc = ((crc << 8) & 0xFFFF) ^ _CRC_TABLE[((crc >> 8) ^ byte) & 0xFF]
    return crc


def slot(key: str | bytes) -> int:
    """The cluster slot of ``key``: CRC16 of its hash tag, mod 16384."""
    return crc16(hash_tag(key)) % SLOTS


_TYPES = (*STATES, "lanes", "meta", "inflight", "wake", "maint", "parked", "rate", "lane_rate",
          "lane_seen", "finished", "waiting", "held", "reserved", "expiring", "flows")


@dataclass(frozen=True, slots=True)
class QueueKeys:
    """Every key of one queue (all share the hash tag ``{name}``)."""

    name: str
    pending: str
    active: str
    delayed: str
    done: str
    dead: str
    expired: str  # jobs that never started by their deadline (decision 0045)
    lanes: str
    meta: str
    inflight: str
    wake: str
    maint: str
    parked: str
    rate: str
    lane_rate: str
    lane_seen: str
    finished: str  # shard channel: the ids of jobs that ended (results, decision 0023)
    # and, as a hash of the same name, the flow notices of children that ended (decision 0038)
    waiting: str  # flow parents waiting for their children (decision 0038)
    held: str  # flow children admitted before their parent, not claimable yet (decision 0038)
    reserved: str  # a sharded queue's ids reserved here for another shard (decision 0040)
    expiring: str  # the deadlines of waiting jobs admitted with expires_ms (decision 0045)
    flows: str  # the server's counts of this queue's flow parents released and failed (decision 0041)
    job_prefix: str

    @classmethod
    def of(cls, name: str) -> QueueKeys:
        check_queue(name)
        k = {t: queue_key(name, t) for t in _TYPES}
        return cls(name=name, job_prefix=queue_key(name, "job:"), **k)

    def job(self, job_id: object) -> str:
        """``emq:{q}:job:<id>``; refuses a malformed id before any I/O."""
        if not isinstance(job_id, str) or not ids.valid(job_id):
            raise InvalidJobId(f"not a branded id: {job_id!r}")
        return self.job_prefix + job_id

    def dedupe(self, key: str) -> str:
        """``emq:{q}:dd:<key>``: a dedupe window's entry (the holder's id), key checked by
        :func:`echomq.protocol.codes.check_dedupe`."""
        return self.job_prefix[:-4] + "dd:" + key

    def state(self, state: object) -> str:
        if state not in STATES:
            raise InvalidArgument(f"state must be one of {STATES}, not {state!r}")
        return str(getattr(self, str(state)))

    def as_dict(self) -> dict[str, str]:
        return {t: getattr(self, t) for t in _TYPES}
