"""The protocol's error codes and the argument checks its builders share. Pure.

Error replies carry a stable code as their first word; :data:`ERROR_CODES` maps each
code a script emits to its exception (tests/echomq/test_protocol.py checks that the
table and the Lua agree).
"""

from __future__ import annotations

from echomq.core.bounds import MAX_LANE
from echomq.core.errors import (
    ConfigurationError,
    EchoMQError,
    InvalidArgument,
    InvalidJobId,
    InvalidPayload,
    PayloadTooLarge,
    ProtocolVersionError,
    ScriptContractError,
    ServerBusy,
    ServerError,
    ServerFull,
    ShardCountMismatch,
)
from echomq.core.model import Lease

__all__ = ["ERROR_CODES", "check_lane", "check_lease", "check_payload", "code_of", "error_from_reply"]

ERROR_CODES: dict[str, type[EchoMQError]] = {
    "EMQKIND": InvalidJobId,  # a non-JOB id (admission answers Verdict.KIND instead)
    "EMQARG": InvalidArgument,  # an argument outside its range, caught by the script
    "EMQKEYS": ScriptContractError,  # KEYS that do not line up with ARGV
    "EMQVERSION": ProtocolVersionError,  # the queue speaks another major version
    "OOM": ServerFull,  # the server's own refusals that mean "not now"
    "BUSY": ServerBusy,
    "NOPERM": ConfigurationError,  # refusals a person must fix (echomq.client.replies.FIXES)
    "WRONGPASS": ConfigurationError,
    "NOAUTH": ConfigurationError,
}
"""Every error code a reply can start with that EchoMQ gives a type of its own; any other
error reply is a :class:`ServerError`. Each mapped exception keeps the code in ``.code``."""


_SHARDED = "queue speaks echomq-sharded"


def error_from_reply(message: str) -> EchoMQError:
    """The typed exception for one error reply (``'EMQARG lease_ms ...'`` etc.)."""
    code = message.split(" ", 1)[0]
    if code == "EMQVERSION" and _SHARDED in message:  # echomq.protocol.sharding.SHARDED
        exc: EchoMQError = ShardCountMismatch(
            f"{message}: this name is a sharded queue; a plain queue client would admit jobs "
            "no sharded consumer sees. Use AsyncShardedQueue(conn, name, shards=N)")
        exc.code = code  # type: ignore[attr-defined]
        return exc
    exc = ERROR_CODES.get(code, ServerError)(message)
    exc.code = code  # type: ignore[attr-defined]
    return exc


def code_of(exc: BaseException) -> str | None:
    """The error code an exception was built from, or None (raised on the client)."""
    return getattr(exc, "code", None)


# ------------------------------------------------------------------ bounds
def check_lane(lane: object) -> str:
    """A lane name: 1..256 characters of str; '' on the wire means none."""
    if lane is None:
        return ""
    if not isinstance(lane, str) or not 1 <= len(lane) <= MAX_LANE:
        raise InvalidArgument(f"lane must be None or a str of 1..{MAX_LANE} characters, not {lane!r}")
    if not lane.isprintable():  # a lone surrogate cannot go on the wire (UnicodeEncodeError)
        try:
            lane.encode()
        except UnicodeEncodeError:
            raise InvalidArgument(f"lane must be UTF-8 text, not {lane!r:.80}") from None
    return lane


def check_payload(payload: object, limit: int) -> bytes:
    if not isinstance(payload, bytes | bytearray | memoryview):
        raise InvalidPayload(f"payload must be bytes, not {type(payload).__name__}")
    data = bytes(payload)
    if len(data) > limit:
        raise PayloadTooLarge(f"payload of {len(data)} bytes exceeds max_payload={limit}")
    return data


def check_lease(lease: object) -> Lease:
    if not isinstance(lease, Lease):
        raise InvalidArgument(f"expected a Lease, not {type(lease).__name__}")
    return lease
