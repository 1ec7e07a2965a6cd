"""Cluster addresses, without I/O: the URL forms that name a Valkey Cluster and its seeds.

``redis+cluster://[user:pw@]h1:p1,h2:p2`` (also ``rediss+cluster``, ``valkey+cluster``,
``valkeys+cluster``), or ``redis://`` with comma-separated hosts; a host without a port
is on 6379, an IPv6 address is written in brackets.
"""

from __future__ import annotations

from echomq.core.errors import InvalidArgument

__all__ = ["CLUSTER_SCHEMES", "Addr", "parse_cluster_url", "split_host"]

Addr = tuple[str, int]
CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss",
                   "valkey+cluster": "redis", "valkeys+cluster": "rediss"}


def split_host(item: str) -> Addr:
    """``(host, port)`` of ``"host:port"``, ``"[v6]:port"`` or a bare host (port 6379)."""
    host, sep, port = item.strip().rpartition(":")
    if not sep or host.endswith(":"):  # no port (or a bare IPv6 address): the default port
        return item.strip().strip("[]"), 6379
    return host.strip("[]"), int(port)


def parse_cluster_url(url: str) -> tuple[str, str, list[Addr]]:
    """``(scheme, userinfo, seed nodes)`` of a cluster URL. ``scheme`` is the single-node
    scheme each node is reached with."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise InvalidArgument(f"not a URL: {url!r}")
    base = CLUSTER_SCHEMES.get(scheme.lower(), scheme.lower())
    if base not in ("redis", "rediss"):
        raise InvalidArgument(f"a cluster URL needs redis(s)+cluster:// or redis(s)://, not {scheme}://")
    netloc, _, path = rest.partition("/")
    path = path.split("?", 1)[0]
    if path not in ("", "0"):
        raise InvalidArgument("a Valkey cluster has only database 0")
    userinfo, _, hosts = netloc.rpartition("@")
    seeds = [split_host(h) for h in hosts.split(",") if h.strip()]
    if not seeds:
        raise InvalidArgument(f"no seed node in {url!r}")
    return base, userinfo, seeds
