"""How a typed task's arguments and result become bytes, and the envelope they travel in.

The payload of a typed task's job is a one-line header, then the arguments::

    EMQT1 json app.send_email\\n["ada@example.org","hello",3]

``EMQT1`` is the envelope's magic and format version (:data:`ENVELOPE_VERSION`), ``json``
the serializer that wrote the body, ``app.send_email`` the task's name; the body is the
arguments as one array in the order of the function's parameters (defaults filled in at
admission). A worker reads the header without the serializer, then decodes the body in
one typed pass to the parameters' annotated types (a ``tuple[...]`` of them), so a
payload of another envelope version, another format or with arguments that do not fit is
refused with :class:`~echomq.tasks.errors.UnreadablePayload` before the task runs.

The result of a task is its return value encoded by the same serializer (no envelope:
``handle.result()`` decodes it to the function's annotated return type).

:class:`MsgspecSerializer` (``json``, the default, or ``msgpack``) handles what msgspec
does (builtins, dataclasses, ``TypedDict``, ``msgspec.Struct``, enums, datetimes, ...) and
pydantic models through its hooks (``model_dump`` / ``model_validate``) when pydantic is
installed. Any object with the :class:`Serializer` methods can replace it
(``App(serializer=...)``). Why msgspec, and the figures: docs/decisions/0033-typed-tasks.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import msgspec

from echomq.core.errors import InvalidArgument
from echomq.tasks.errors import UnreadablePayload

__all__ = ["ENVELOPE_VERSION", "MsgspecSerializer", "Serializer", "open_envelope"]

ENVELOPE_VERSION = 1
_MAGIC = b"EMQT%d" % ENVELOPE_VERSION


@runtime_checkable
class Serializer(Protocol):
    """What a typed-task app needs of a serializer.

    ``format`` is a short name without spaces (it travels in every envelope); ``encode``
    turns a value into bytes; ``decoder(type_)`` returns a function decoding bytes (or a memoryview) to
    ``type_`` (raising ``ValueError`` or ``TypeError`` on bytes that do not fit);
    ``check(value, type_)`` returns ``value`` (or its converted form) if it may travel as
    ``type_``, else raises ``ValueError``/``TypeError``.
    """

    format: str

    def encode(self, value: Any) -> bytes: ...

    def decoder(self, type_: Any) -> Callable[[bytes | memoryview], Any]: ...

    def check(self, value: Any, type_: Any) -> Any: ...


def _is_pydantic(type_: Any) -> bool:
    return isinstance(type_, type) and hasattr(type_, "model_validate") and hasattr(type_, "model_dump")


class MsgspecSerializer:
    """msgspec's JSON (``format="json"``, the default) or MessagePack (``"msgpack"``).

    ``enc_hook``/``dec_hook`` are msgspec's hooks for types it does not know; pydantic
    models are handled after them (dumped in JSON mode, validated on the way back).
    """

    def __init__(self, format: str = "json", *, enc_hook: Callable[[Any], Any] | None = None,
                 dec_hook: Callable[[type, Any], Any] | None = None) -> None:
        if format not in ("json", "msgpack"):
            raise InvalidArgument(f"format must be 'json' or 'msgpack', not {format!r}")
        self.format = format
        self._user_enc, self._user_dec = enc_hook, dec_hook
        mod: Any = msgspec.json if format == "json" else msgspec.msgpack
        self._mod = mod
        self._encoder = mod.Encoder(enc_hook=self._enc_hook)
        self.encode: Callable[[Any], bytes] = self._encoder.encode
        self._decoders: dict[Any, Callable[[bytes | memoryview], Any]] = {}

    def _enc_hook(self, value: Any) -> Any:
        if self._user_enc is not None:
            try:
                return self._user_enc(value)
            except NotImplementedError:
                pass
        dump = getattr(value, "model_dump", None)
        if dump is not None:
            return dump(mode="json")
        raise NotImplementedError(f"cannot encode a {type(value).__name__}")

    def _dec_hook(self, type_: type, value: Any) -> Any:
        if self._user_dec is not None:
            try:
                return self._user_dec(type_, value)
            except NotImplementedError:
                pass
        if _is_pydantic(type_):
            return value if isinstance(value, type_) else type_.model_validate(value)  # type: ignore[attr-defined]
        raise NotImplementedError(f"cannot decode a {type_!r}")

    def decoder(self, type_: Any) -> Callable[[bytes | memoryview], Any]:
        found = self._decoders.get(type_)
        if found is None:
            found = self._mod.Decoder(type_, dec_hook=self._dec_hook).decode
            self._decoders[type_] = found
        return found

    def check(self, value: Any, type_: Any) -> Any:
        # Encoded and decoded to ``type_``: msgspec checks a dataclass or Struct instance
        # only when it decodes one (``convert`` passes instances through unchecked), so the
        # value is checked as deep as the worker will decode it.
        return self.decoder(type_)(self.encode(value))


def envelope_head(serializer: Serializer, name: str, mode: str = "") -> bytes:
    """The header line of ``name``'s envelopes written by ``serializer``; ``mode`` (a
    canvas step that receives its children's results, :mod:`echomq.tasks.canvas`) is a
    fourth word, which a worker without canvas refuses rather than misreads."""
    tail = b" " + mode.encode() if mode else b""
    return b"%s %s %s%s\n" % (_MAGIC, serializer.format.encode(), name.encode(), tail)


def open_envelope(payload: bytes, fmt: str) -> tuple[str, memoryview, str]:
    """``(task name, body, mode)`` of an envelope written in format ``fmt`` (mode '' but
    for a canvas step); UnreadablePayload for anything else (no header, another envelope
    version or another format)."""
    end = payload.find(b"\n", 0, 512)
    head = payload[:end].split(b" ") if end > 0 else []
    if len(head) not in (3, 4) or not head[0].startswith(b"EMQT"):
        raise UnreadablePayload(f"not a typed-task envelope (begins {payload[:40]!r})")
    if head[0] != _MAGIC:
        raise UnreadablePayload(f"envelope version {head[0][4:].decode(errors='replace')!r}; "
                                f"this worker reads version {ENVELOPE_VERSION}")
    if head[1].decode(errors="replace") != fmt:
        raise UnreadablePayload(f"the arguments are {head[1].decode(errors='replace')}; "
                                f"this app reads {fmt}")
    mode = head[3].decode(errors="replace") if len(head) == 4 else ""
    return head[2].decode(errors="replace"), memoryview(payload)[end + 1:], mode
