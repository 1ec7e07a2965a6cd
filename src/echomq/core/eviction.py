"""The server's eviction policy, checked against the queue's promise that nothing is lost.

A Valkey with ``maxmemory`` and any ``maxmemory-policy`` but ``noeviction`` deletes keys
to make room when it is full: a job row, a pending set, a lease. Nothing reports it:
the job is simply gone. Under ``noeviction`` a full server refuses writes instead (a
typed back-pressure error, nothing half-written), which is what a queue needs. (A
``volatile-*`` policy evicts only keys with a TTL, which job rows have only after they
finish; but the same server often holds other data, and a policy is changed at runtime
by whoever runs the server, so every policy but ``noeviction`` counts as unsafe.)

:func:`check_eviction_policy` reads the policy from ``INFO memory`` (no ``CONFIG``
permission needed) on the server, or on every primary of a cluster. A consumer runs it
when it starts: it logs a warning and, unless ``ConsumerOptions(allow_eviction=True)``,
refuses to run with :class:`UnsafeEvictionPolicy`. A policy it cannot read (the
server is down, or the user may not run ``INFO``) is logged and not held against it.
"""

from __future__ import annotations

import logging
from typing import Any

from echomq.core.errors import EchoMQError

__all__ = ["SAFE_POLICY", "UnsafeEvictionPolicy", "check_eviction_policy", "eviction_policies"]

log = logging.getLogger("echomq.core.eviction")

SAFE_POLICY = "noeviction"


class UnsafeEvictionPolicy(EchoMQError):
    """The server may evict keys when full (``maxmemory-policy`` other than ``noeviction``):
    jobs could vanish without an error. Set ``maxmemory-policy noeviction``, or pass
    ``allow_eviction=True`` to run anyway."""


def _policy(info: Any) -> str:
    if isinstance(info, bytes):
        info = info.decode()
    if isinstance(info, dict):
        value = info.get("maxmemory_policy", info.get(b"maxmemory_policy", ""))
        return value.decode() if isinstance(value, bytes) else str(value)
    for line in str(info).splitlines():
        if line.startswith("maxmemory_policy:"):
            return line.split(":", 1)[1].strip()
    return ""


async def eviction_policies(conn: Any) -> dict[str, str]:
    """``{node: maxmemory-policy}`` of the server, or of every primary of a cluster."""
    primaries = getattr(conn, "primaries", None)
    if primaries is None:  # a single server
        return {"server": _policy(await conn.command("INFO", "memory"))}
    if not primaries:
        await conn.refresh()
        primaries = conn.primaries
    return {f"{host}:{port}": _policy(await conn.node((host, port)).command("INFO", "memory"))
            for host, port in primaries}


async def check_eviction_policy(conn: Any, *, allow: bool = False, who: str = "echomq") -> dict[str, str]:
    """The nodes whose policy could silently drop jobs (empty when every one is
    ``noeviction``). Logs a warning for them; raises :class:`UnsafeEvictionPolicy` unless
    ``allow``. A policy that cannot be read is logged at warning level and skipped."""
    try:
        policies = await eviction_policies(conn)
    except Exception as exc:
        log.warning("%s: could not read the server's maxmemory-policy (%r); if it is not "
                    "noeviction, a full server may silently drop jobs", who, exc)
        return {}
    unsafe = {node: p for node, p in policies.items() if p and p != SAFE_POLICY}
    if unsafe:
        where = ", ".join(f"{node} has maxmemory-policy {p}" for node, p in sorted(unsafe.items()))
        message = (f"{who}: {where}: a full server would evict keys and jobs could vanish without "
                   f"an error; set maxmemory-policy {SAFE_POLICY}")
        if not allow:
            raise UnsafeEvictionPolicy(message + " (or pass allow_eviction=True to run anyway)")
        log.warning("%s (running anyway: allow_eviction=True)", message)
    return unsafe
