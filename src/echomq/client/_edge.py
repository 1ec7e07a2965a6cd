"""The one edge where client-library exceptions become EchoMQ's (no ``redis`` type escapes).

Modelled on httpcore's ``map_exceptions``: every public method of a connector runs its
I/O inside :func:`mapped`, and every error reply handed back in place (pipelines) goes
through :func:`reply`. Error replies are typed by their code through
:data:`echomq.protocol.ERROR_CODES`; failures of the connection itself that outlived the
retry budget (or that a zero-budget caller did not retry) are
:class:`~echomq.core.errors.ServerUnavailable`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from redis import exceptions as rex

from echomq.core.errors import EchoMQError, InvalidArgument, ServerError, ServerUnavailable
from echomq.protocol import error_from_reply

__all__ = ["mapped", "replies", "reply", "translate"]


# redis-py strips the code from the replies it maps to a class of its own ("READONLY You
# can't write ..." arrives as ReadOnlyError("You can't write ...")): the edge puts it back,
# so that the code a worker classifies by survives the translation.
_STRIPPED: tuple[tuple[type[rex.ResponseError], str], ...] = (
    (rex.OutOfMemoryError, "OOM"),
    (rex.ReadOnlyError, "READONLY"),
    (rex.TryAgainError, "TRYAGAIN"),
    (rex.MasterDownError, "MASTERDOWN"),  # subclasses before their bases
    (rex.ClusterDownError, "CLUSTERDOWN"),
    (rex.MovedError, "MOVED"),
    (rex.AskError, "ASK"),
    (rex.ClusterCrossSlotError, "CROSSSLOT"),
    (rex.NoScriptError, "NOSCRIPT"),
    (rex.ExecAbortError, "EXECABORT"),
)


def _reply_text(exc: rex.ResponseError) -> str:
    text = str(exc)
    for cls, code in _STRIPPED:
        if isinstance(exc, cls):
            return text if text.split(" ", 1)[0] == code else f"{code} {text}"
    return text


def no_auth(text: str) -> bool:
    """An authentication refusal that says no credentials were given (NOAUTH), as
    opposed to wrong ones: redis-py strips the code, so the message tells them apart
    ("Authentication required.", "HELLO must be called with the client already
    authenticated ...")."""
    low = text.lower()
    return "NOAUTH" in text or "required" in low or "already authenticated" in low


def translate(exc: BaseException) -> BaseException:
    """The EchoMQ exception for ``exc`` (``exc`` itself when it is not the client's)."""
    if isinstance(exc, EchoMQError):
        return exc
    if isinstance(exc, rex.AuthenticationError | rex.AuthorizationError | rex.NoPermissionError):
        text = str(exc)
        code = "NOPERM" if not isinstance(exc, rex.AuthenticationError) else (
            "NOAUTH" if no_auth(text) else "WRONGPASS")
        return error_from_reply(f"{code} {text}")
    if isinstance(exc, rex.ResponseError):  # NOSCRIPT, MOVED, ASK, EMQ*, OOM, BUSY ...
        return error_from_reply(_reply_text(exc))
    if isinstance(exc, rex.ConnectionError | rex.TimeoutError | OSError):
        return ServerUnavailable(f"server unreachable: {exc!r}")
    if isinstance(exc, rex.DataError):
        return InvalidArgument(str(exc))
    if isinstance(exc, rex.RedisError):
        return ServerError(f"{type(exc).__name__}: {exc}")
    return exc


@contextmanager
def mapped() -> Iterator[None]:
    """Run a block; any client exception leaves it as its EchoMQ counterpart."""
    try:
        yield
    except EchoMQError:
        raise
    except Exception as exc:
        mapped_exc = translate(exc)
        if mapped_exc is exc:
            raise
        raise mapped_exc from exc


def reply(value: Any) -> Any:
    """One reply of a pipeline: an in-place client error becomes its EchoMQ exception."""
    if isinstance(value, rex.RedisError):
        return translate(value)
    return value


def replies(values: list[Any]) -> list[Any]:
    return [reply(v) if isinstance(v, rex.RedisError) else v for v in values]
