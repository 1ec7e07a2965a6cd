# Generated from echomq/client/_async/connect.py by scripts/unasync_gen.py. Do not edit.
"""One entry point for a connector: a single server or a cluster, chosen from the target."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from echomq.client._sync.cluster import ClusterConnector
from echomq.client._sync.connector import Connector
from echomq.core.cluster_url import CLUSTER_SCHEMES, Addr, split_host
from echomq.core.errors import InvalidArgument

__all__ = ["connect"]


def connect(
    target: str | Sequence[str | Addr],
    *,
    cluster: bool | None = None,
    retry_budget_s: float = 10.0,
    socket_timeout: float | None = 5.0,
    max_connections: int | None = None,
) -> Connector | ClusterConnector:
    """A connector for ``target``, without I/O: a single server or a cluster.

    A cluster when ``cluster=True``, when ``target`` is a list of seed nodes
    (``"host:port"`` or ``(host, port)``), when the scheme is ``redis+cluster://``
    (``rediss+``, ``valkey+``) or when the URL names several comma-separated hosts.
    Otherwise one server (``redis://``, ``rediss://``, ``unix://``).
    """
    opts: dict[str, Any] = {"retry_budget_s": retry_budget_s, "socket_timeout": socket_timeout,
                            "max_connections": max_connections}
    if not isinstance(target, str):
        if cluster is False:
            raise InvalidArgument("a list of seed nodes names a cluster")
        seeds = [split_host(t) if isinstance(t, str) else (t[0], int(t[1])) for t in target]
        return ClusterConnector(seeds, **opts)
    scheme, _, rest = target.partition("://")
    several = "," in rest.partition("/")[0]
    if cluster is None:
        cluster = scheme.lower() in CLUSTER_SCHEMES or several
    if cluster:
        return ClusterConnector.from_url(target, **opts)
    if scheme.lower() in CLUSTER_SCHEMES or several:
        raise InvalidArgument(f"cluster=False, but {target!r} names a cluster")
    return Connector.from_url(target, **opts)
