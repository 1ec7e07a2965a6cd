"""One node of a :class:`~echomq.servers.local_cluster.LocalCluster`, and the two helpers that
start one: a free loopback port pair (the node's and its cluster bus's) and a bounded
poll for a condition. Each node is an :class:`~echomq.servers.server.EmbeddedValkey` in
cluster mode; nothing here joins nodes into a cluster (that is ``LocalCluster``'s).
"""

from __future__ import annotations

import random
import socket
import time
from collections.abc import Callable
from typing import Any

import redis

from echomq.core.errors import ServerUnavailable
from echomq.protocol.decoders import text
from echomq.servers.server import EmbeddedValkey

__all__ = ["ClusterNode"]

_POLL = 0.05
_Addr = tuple[str, int]
# Replicas sync at once (the default waits 5 s for more replicas to share a diskless sync).
# Announce the loopback address, so a node knows it before any MEET (a one-node cluster).
_NODE_CONFIG = {"repl-diskless-sync-delay": "0", "cluster-announce-ip": "127.0.0.1"}


class ClusterNode:
    """One node of a :class:`LocalCluster`: its address, process id, node id and live role."""

    def __init__(self, server: EmbeddedValkey) -> None:
        self.server = server
        self.host, self.port = server.host, server.port
        self.address: _Addr = (self.host, self.port)
        self.node_id = ""
        self.paused = False

    @property
    def pid(self) -> int | None:
        """The process id, or None while the node is killed or stopped."""
        return self.server.pid

    @property
    def running(self) -> bool:
        proc = self.server.process
        return proc is not None and proc.poll() is None

    @property
    def live(self) -> bool:
        """Running and not paused: the node can answer."""
        return self.running and not self.paused

    @property
    def role(self) -> str:
        """``"primary"``/``"replica"`` as the node itself says now, else ``"down"``/``"paused"``."""
        if not self.running:
            return "down"
        if self.paused:
            return "paused"
        try:
            return "primary" if text(self.command("ROLE")[0]) == "master" else "replica"
        except (redis.RedisError, OSError):
            return "down"

    def command(self, *args: Any, timeout: float = 2.0) -> Any:
        """Run one command on this node alone (no cluster redirection); replies undecoded."""
        client = redis.Redis(host=self.host, port=self.port, socket_timeout=timeout,
                             socket_connect_timeout=timeout)
        try:
            return client.execute_command(*args)  # type: ignore[no-untyped-call]
        finally:
            client.close()

    def __repr__(self) -> str:
        return f"ClusterNode({self.host}:{self.port}, pid={self.pid}, id={self.node_id[:8]})"


def _free_port_pair(rng: random.Random) -> int:
    """A loopback port P with P and its cluster-bus port P + 10000 both free, both below the
    usual ephemeral range (32768+), so that client sockets cannot take them while a node
    is down between a kill and a restart."""
    for _ in range(1000):
        port = rng.randrange(12000, 22000)
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 10000))
        except OSError:
            continue
        return port
    raise ServerUnavailable("local cluster: no free port pair on 127.0.0.1")



def _wait(what: str, check: Callable[[], bool], timeout: float) -> None:
    """Poll ``check`` (errors count as "not yet") until true, or raise ServerUnavailable."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while True:
        try:
            if check():
                return
        except (redis.RedisError, OSError, LookupError) as exc:
            last = exc
        if time.monotonic() >= deadline:
            detail = f" (last error: {last!r})" if last else ""
            raise ServerUnavailable(f"local cluster: {what} not reached in {timeout}s{detail}")
        time.sleep(_POLL)
