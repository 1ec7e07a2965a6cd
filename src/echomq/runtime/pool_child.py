"""A process-pool handler's child: ``python -m echomq.runtime.pool_child package.module:function``.

The child only computes (docs/decisions/0035-process-pool.md). Its parent
(:mod:`echomq.runtime.process_pool`) holds the lease, beats it and writes the outcome; the child
imports the handler by its path, then answers one job at a time over its stdin/stdout
pipes. Nothing is pickled: every frame is a small JSON header plus raw bytes::

    frame  = len(header) u32 BE, len(body) u32 BE, header (JSON object), body (bytes)

    parent -> child   {"sys_path": [...]}                         first, once
                      {"queue", "id", "attempt", "lane", "deadline_ms", "timeout_ms"}
                      + the payload as the body                   one per attempt
    child -> parent   {"ready": pid} | {"fatal": text}            once, after the import
                      {"kind": "none" | "ack" | "defer" | "backoff" | "error", ...}
                      + an Ack's result as the body               one per attempt

A handler's exception is answered as ``{"kind": "error", "error": <the row's text>}``
(:func:`echomq.failures.failure_text`). Whatever the handler prints goes to stderr (fd 1
is pointed there): the protocol has descriptors of its own. The child ends at EOF on its
input (the pool closing) and when its parent dies (``PR_SET_PDEATHSIG`` on Linux), so a
killed worker leaves no handler running on its own.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import struct
import sys
from typing import Any

__all__ = ["MAX_HEADER", "decode_header", "frame", "main", "outcome_record", "resolve"]

_SIZES = struct.Struct(">II")
MAX_HEADER = 1 << 20  # a header is a few fields and an error text (bounded by failures.py)


def frame(header: dict[str, Any], body: bytes = b"") -> bytes:
    """One frame: the sizes, the JSON header, the raw body."""
    head = json.dumps(header, separators=(",", ":")).encode()
    return _SIZES.pack(len(head), len(body)) + head + body


def decode_header(sizes: bytes) -> tuple[int, int]:
    """The header and body lengths of a frame from its first 8 bytes (ConnectionError if absurd)."""
    head, body = _SIZES.unpack(sizes)
    if head > MAX_HEADER:  # the other end is not speaking this protocol: a broken pipe
        raise ConnectionError(f"a frame header of {head} bytes")
    return head, body


def resolve(path: str) -> Any:
    """Import ``package.module:function`` (dotted attributes allowed after the colon)."""
    from echomq.core.errors import InvalidArgument

    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise InvalidArgument(f"expected package.module:function, got {path!r}")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def outcome_record(value: Any) -> tuple[dict[str, Any], bytes]:
    """A handler's return value as ``(header, body)`` (``as_outcome`` decides what it means)."""
    from echomq.core.outcomes import Ack, Backoff, Defer, as_outcome

    outcome = as_outcome(value)
    if outcome is None:
        return {"kind": "none"}, b""
    if isinstance(outcome, Ack):
        return {"kind": "ack"}, outcome.result
    if isinstance(outcome, Defer):
        return {"kind": "defer", "delay_ms": outcome.delay_ms}, b""
    assert isinstance(outcome, Backoff)
    return {"kind": "backoff", "error": outcome.error, "delay_ms": outcome.delay_ms}, b""


def _read_exactly(fd: int, n: int) -> bytes | None:
    chunks, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None  # EOF: the pool closed us (or the parent is gone)
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _read_frame(fd: int) -> tuple[dict[str, Any], bytes] | None:
    sizes = _read_exactly(fd, _SIZES.size)
    if sizes is None:
        return None
    head_n, body_n = decode_header(sizes)
    head = _read_exactly(fd, head_n)
    body = _read_exactly(fd, body_n) if body_n else b""
    if head is None or body is None:
        return None
    return json.loads(head), body


def _write(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _die_with_parent(parent: int) -> None:
    """Linux: SIGKILL this process when the parent dies (its worker was killed)."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the prctl: nobody will read us
        os._exit(0)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    path, parent = args[0], int(args[1])
    _die_with_parent(parent)
    # The protocol gets descriptors of its own; fd 0 reads nothing, fd 1 is stderr.
    rin, rout = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    hello = _read_frame(rin)
    if hello is None:
        return
    sys.path[:] = [p for p in hello[0].get("sys_path", []) if isinstance(p, str)] or sys.path
    from echomq.core.failures import failure_text
    from echomq.core.model import Lease

    try:
        handler = resolve(path)
        if not callable(handler):
            raise TypeError(f"{path} is not callable")
    except BaseException as exc:
        _write(rout, frame({"fatal": failure_text(exc)}))
        return
    _write(rout, frame({"ready": os.getpid()}))
    while True:
        job = _read_frame(rin)
        if job is None:
            return
        head, payload = job
        lease = Lease(queue=head["queue"], id=head["id"], attempt=head["attempt"], payload=payload,
                      lane=head["lane"], deadline_ms=head["deadline_ms"], timeout_ms=head["timeout_ms"])
        try:
            record, body = outcome_record(handler(lease))
        except Exception as exc:  # the attempt's failure: the row keeps this text
            record, body = {"kind": "error", "error": failure_text(exc)}, b""
        _write(rout, frame(record, body))


if __name__ == "__main__":
    main()
