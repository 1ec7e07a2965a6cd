"""The server's memory against its limit: what the worker, ``info`` and the dashboard show.

A queue runs under ``maxmemory-policy noeviction`` (an evicting policy deletes rows
and set members independently). At the limit the server refuses admission
(:class:`~echomq.core.errors.ServerFull`) while the draining transitions still run
(docs/decisions/0010-memory-limit.md). :class:`MemoryStatus` is one reading of
``INFO memory``; :func:`echomq.memory_status` (blocking) and
:func:`echomq.memory_status_async` take it from a connector (and a queue name, which
picks the node on a cluster)::

    status = echomq.memory_status(connector, "orders")
    print(status.describe())   # used 3.9 MiB of maxmemory 4.0 MiB (98%, policy noeviction)
    if status.refusing: ...
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from echomq.core.eviction import SAFE_POLICY  # the only maxmemory-policy a queue may run under

__all__ = ["BUFFER_SLACK", "SAFE_POLICY", "MemoryStatus", "human", "parse_info"]

# How far below its limit a server still counts as at it: a refused command's query
# buffer (up to a few tens of KiB for a batch) counts while it is read and is freed
# right after, so a server that just refused can read that much under its line.
BUFFER_SLACK = 64 * 1024


def human(n: int) -> str:
    """Bytes for a person: ``512 B``, ``3.9 MiB``."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


@dataclass(frozen=True, slots=True)
class MemoryStatus:
    """One reading of a server's memory (``INFO memory``).

    ``used`` is ``used_memory``; ``counted`` is what the server compares with its limit
    (``used_memory`` less replication and AOF buffers); ``maxmemory`` 0 means no limit.
    """

    used: int
    maxmemory: int
    policy: str
    counted: int
    node: str = ""

    @property
    def limited(self) -> bool:
        return self.maxmemory > 0

    @property
    def refusing(self) -> bool:
        """True at the limit under noeviction: admissions are refused (``ServerFull``), or
        will be within a few more. The server decides per command against a figure that
        moves with every client buffer (a refused request's own query buffer, tens of KiB,
        is freed right after), so within 1% of the limit, or within :data:`BUFFER_SLACK`
        where that is more (a small limit), counts as at it."""
        return (self.limited and self.policy == SAFE_POLICY
                and self.counted >= self.maxmemory - max(self.maxmemory // 100, BUFFER_SLACK))

    @property
    def evicting(self) -> bool:
        """True when the limit evicts keys: a queue may lose rows; run ``noeviction``."""
        return self.limited and self.policy != SAFE_POLICY

    @property
    def fraction(self) -> float | None:
        """Counted memory over the limit (about 1.0: at the limit); None without one."""
        return self.counted / self.maxmemory if self.limited else None

    def describe(self) -> str:
        """One line: ``used 4.1 MiB of maxmemory 4.0 MiB (noeviction): refusing admissions``."""
        where = f"{self.node}: " if self.node else ""
        if not self.limited:
            return f"{where}used {human(self.used)}, no maxmemory (policy {self.policy})"
        line = (f"{where}used {human(self.counted)} of maxmemory {human(self.maxmemory)} "
                f"({self.fraction:.0%}, policy {self.policy})")
        if self.refusing:
            line += ": refusing admissions (producers get ServerFull; workers drain)"
        elif self.evicting:
            line += f": this policy evicts queue keys, run maxmemory-policy {SAFE_POLICY}"
        return line


def _field(info: Any, name: str, default: Any = 0) -> Any:
    if isinstance(info, dict):
        value = info.get(name, default)
        return value.decode() if isinstance(value, bytes) else value
    return default


def parse_info(info: Any, node: str = "") -> MemoryStatus:
    """A :class:`MemoryStatus` from ``INFO memory`` (redis-py's dict, or the raw text)."""
    if isinstance(info, bytes):
        info = info.decode()
    if isinstance(info, str):
        info = dict(line.split(":", 1) for line in info.splitlines() if ":" in line
                    and not line.startswith("#"))
    used = int(_field(info, "used_memory"))
    overhead = int(_field(info, "mem_not_counted_for_evict"))
    return MemoryStatus(used=used, maxmemory=int(_field(info, "maxmemory")),
                        policy=str(_field(info, "maxmemory_policy", "unknown")),
                        counted=max(used - overhead, 0), node=node)
