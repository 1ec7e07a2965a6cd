"""A real local Valkey Cluster (primaries + replicas on loopback), for tests and for users.

:class:`LocalCluster` starts ``primaries * (1 + replicas_per_primary)`` cluster-mode
:class:`~echomq.servers.server.EmbeddedValkey` nodes on free 127.0.0.1 ports, joins them with
plain cluster commands (the steps of ``valkey-cli --cluster create``, without its
fixed sleeps), and waits until every node says ``cluster_state:ok``, all agree on
who serves every slot, and every replica is in sync. It stops every process it
started, by process id, on :meth:`LocalCluster.stop`, at the end of a ``with``
block, or at exit. Fault helpers (``kill_node``, ``pause_node``, ``failover``,
``restart_node``, ``wait_healthy``) let tests break the cluster and wait for it to heal.

A cluster started in a ``base_dir`` of the caller's keeps its nodes' data there (AOF and
``nodes.conf``) with ``cluster.json`` (the shape and the ports); :meth:`LocalCluster.reopen`
starts the same nodes again on the same ports and data after a stop or a crash, and
waits until the cluster has healed (``codemojex play --cluster`` resumes a game with it).

``python -m echomq.servers.local_cluster`` runs one and prints its seed nodes until Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import atexit
import json
import random
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from echomq.core.errors import InvalidArgument, ServerUnavailable
from echomq.protocol.decoders import text
from echomq.protocol.keyspace import SLOTS
from echomq.protocol.keyspace import slot as key_slot
from echomq.servers.cluster_node import _NODE_CONFIG, ClusterNode, _Addr, _free_port_pair, _wait
from echomq.servers.server import EmbeddedValkey

__all__ = ["SLOTS", "ClusterNode", "LocalCluster", "main"]

class LocalCluster:
    """A Valkey Cluster of managed local processes; see the module docstring."""

    def __init__(
        self,
        primaries: int = 3,
        replicas_per_primary: int = 1,
        node_timeout_ms: int = 2000,
        base_dir: str | Path | None = None,
    ) -> None:
        if primaries < 1 or replicas_per_primary < 0:
            raise InvalidArgument("need at least one primary and a non-negative replica count")
        self.primaries = primaries
        self.replicas_per_primary = replicas_per_primary
        self.node_timeout_ms = node_timeout_ms
        self._own_dir = base_dir is None
        self.base_dir = Path(base_dir or tempfile.mkdtemp(prefix="echomq-cluster-"))
        self.nodes: list[ClusterNode] = []
        self.started_pids: list[int] = []
        self.startup_seconds = 0.0
        self._atexit = False

    # -- addresses ------------------------------------------------------------------------
    @property
    def startup_nodes(self) -> list[_Addr]:
        return [n.address for n in self.nodes]

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:PORT`` of a live seed node."""
        seed = next((n for n in self.nodes if n.live), self.nodes[0])
        return f"redis://{seed.host}:{seed.port}"

    # -- lifecycle ------------------------------------------------------------------------
    def start(self, timeout: float = 60.0) -> LocalCluster:
        """Start and join the nodes; wait until healthy. A LocalCluster runs once."""
        if self.nodes:
            return self
        if any(self.base_dir.glob("node-*/nodes.conf")):
            raise InvalidArgument(f"{self.base_dir} already holds a cluster: give an empty directory")
        t0 = time.monotonic()
        if not self._atexit:
            atexit.register(self.stop)
            self._atexit = True
        total = self.primaries * (1 + self.replicas_per_primary)
        rng = random.Random()
        try:
            for i in range(total):
                for attempt in range(5):  # another process may take the port before we bind it
                    node = ClusterNode(EmbeddedValkey(
                        port=_free_port_pair(rng), data_dir=self.base_dir / f"node-{i}",
                        cluster=True, cluster_node_timeout_ms=self.node_timeout_ms,
                        extra=_NODE_CONFIG))
                    try:
                        self._start_process(node)
                        break
                    except ServerUnavailable:
                        if attempt == 4:
                            raise
                self.nodes.append(node)
            self._create(timeout)
        except BaseException:
            self.stop()
            raise
        self._record()
        self.startup_seconds = time.monotonic() - t0
        return self

    # -- reopening a kept cluster -----------------------------------------------------------
    _RECORD = "cluster.json"

    def _record(self) -> None:
        """Write the shape and the ports next to the nodes' data (read by :meth:`reopen`)."""
        record = {"primaries": self.primaries, "replicas_per_primary": self.replicas_per_primary,
                  "node_timeout_ms": self.node_timeout_ms, "ports": [n.port for n in self.nodes]}
        tmp = self.base_dir / f".{self._RECORD}.tmp"
        tmp.write_text(json.dumps(record))
        tmp.replace(self.base_dir / self._RECORD)

    @classmethod
    def kept(cls, base_dir: str | Path) -> bool:
        """Whether ``base_dir`` holds a cluster that :meth:`reopen` can start again."""
        return (Path(base_dir) / cls._RECORD).is_file()

    @classmethod
    def reopen(cls, base_dir: str | Path, timeout: float = 60.0) -> LocalCluster:
        """Start the cluster kept in ``base_dir`` again: every node on its recorded port and
        its own data (node ids, slots and roles from ``nodes.conf``, keys from the AOF);
        returns once the cluster is healthy. A recorded port now taken by another process
        is :class:`~echomq.core.errors.ServerUnavailable`; nothing kept is removed."""
        base = Path(base_dir)
        try:
            record = json.loads((base / cls._RECORD).read_text())
            ports = [int(p) for p in record["ports"]]
            cluster = cls(int(record["primaries"]), int(record["replicas_per_primary"]),
                          int(record["node_timeout_ms"]), base_dir=base)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise InvalidArgument(f"{base}: no cluster to reopen ({exc})") from None
        if len(ports) != cluster.primaries * (1 + cluster.replicas_per_primary):
            raise InvalidArgument(f"{base}: {cls._RECORD} names {len(ports)} nodes, not its shape")
        t0 = time.monotonic()
        atexit.register(cluster.stop)
        cluster._atexit = True
        try:
            for i, port in enumerate(ports):
                node = ClusterNode(EmbeddedValkey(
                    port=port, data_dir=base / f"node-{i}", cluster=True,
                    cluster_node_timeout_ms=cluster.node_timeout_ms, extra=_NODE_CONFIG))
                cluster._start_process(node)
                node.node_id = text(node.command("CLUSTER", "MYID"))
                cluster.nodes.append(node)
            cluster._wait_agreed(timeout)
        except BaseException:
            cluster.stop()
            raise
        cluster.startup_seconds = time.monotonic() - t0
        return cluster

    def _start_process(self, node: ClusterNode) -> None:
        node.server.start()
        node.paused = False
        if node.pid is not None:
            self.started_pids.append(node.pid)

    def _create(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        prim = self.nodes[: self.primaries]
        for i, node in enumerate(self.nodes):
            node.node_id = text(node.command("CLUSTER", "MYID"))
            # Distinct epochs up front, as valkey-cli does: no epoch-collision round.
            node.command("CLUSTER", "SET-CONFIG-EPOCH", i + 1)
        for i, node in enumerate(prim):
            lo, hi = SLOTS * i // self.primaries, SLOTS * (i + 1) // self.primaries - 1
            node.command("CLUSTER", "ADDSLOTSRANGE", lo, hi)
        for a in self.nodes:  # everyone meets everyone: no waiting for gossip to spread
            for b in self.nodes:
                if a is not b:
                    a.command("CLUSTER", "MEET", b.host, b.port)
        everyone = {n.node_id for n in self.nodes}
        _wait("every node knows every other",
              lambda: all({f[0] for f in self._cluster_nodes(n) if "handshake" not in f[2]}
                          >= everyone for n in self.nodes),
              deadline - time.monotonic())
        for i, node in enumerate(self.nodes[self.primaries:]):
            node.command("CLUSTER", "REPLICATE", prim[i % self.primaries].node_id)
        _wait("replicas in sync", lambda: all(
            text(n.command("ROLE")[3]) == "connected" for n in self.nodes[self.primaries:]),
            deadline - time.monotonic())
        # CLUSTER SLOTS lists a replica only once its replication offset is non-zero, and the
        # offset only moves with a write (or a replica ping, every 10 s by default). One write
        # that changes nothing on the brand-new, empty primaries moves it at once.
        for node in prim:
            node.command("FLUSHALL")
        self._wait_agreed(deadline - time.monotonic(), self.replicas_per_primary)

    def stop(self) -> None:
        """Stop every node by its process id (paused ones are resumed first); idempotent."""
        for node in self.nodes:
            proc = node.server.process
            if proc is not None and proc.poll() is None:
                if node.paused:
                    proc.send_signal(signal.SIGCONT)
                proc.terminate()  # all at once; the waits below then overlap
            node.paused = False
        for node in self.nodes:
            node.server.stop()
        if self._own_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- views ----------------------------------------------------------------------------
    def _find(self, match: Callable[[ClusterNode], bool], what: str) -> ClusterNode:
        for node in self.nodes:
            if match(node):
                return node
        raise LookupError(f"no node of this cluster is {what}")

    def _by_address(self, host: str, port: int) -> ClusterNode:
        return self._find(lambda n: n.address == (host, port), f"at {host}:{port}")

    def _by_id(self, node_id: str) -> ClusterNode:
        return self._find(lambda n: n.node_id == node_id, f"{node_id}")

    @staticmethod
    def _cluster_nodes(node: ClusterNode) -> list[list[str]]:
        """``CLUSTER NODES`` of ``node``, one split line per node it knows."""
        return [line.split() for line in text(node.command("CLUSTER", "NODES")).splitlines()
                if line.strip()]

    @staticmethod
    def _slot_map(node: ClusterNode) -> list[tuple[int, int, _Addr, list[_Addr]]]:
        """``CLUSTER SLOTS`` of ``node``: (first, last, primary address, replica addresses)."""
        out = []
        for entry in node.command("CLUSTER", "SLOTS"):
            addrs = [(text(a[0]), int(a[1])) for a in entry[2:]]
            out.append((int(entry[0]), int(entry[1]), addrs[0], addrs[1:]))
        return out

    def _live(self) -> list[ClusterNode]:
        return [n for n in self.nodes if n.live]

    def _seed(self) -> ClusterNode:
        live = self._live()
        if not live:
            raise ServerUnavailable("local cluster: no live node")
        return live[0]

    def primary_for_slot(self, slot: int) -> ClusterNode:
        """The node that a live node's ``CLUSTER SLOTS`` names as the primary of ``slot``
        (after a fault, call :meth:`wait_healthy` first for a settled answer)."""
        for lo, hi, primary, _ in self._slot_map(self._seed()):
            if lo <= slot <= hi:
                return self._by_address(*primary)
        raise LookupError(f"slot {slot} is not served")

    def primary_for_key(self, key: str | bytes) -> ClusterNode:
        return self.primary_for_slot(key_slot(key))

    def replicas_of(self, primary: ClusterNode) -> list[ClusterNode]:
        """The non-failed replicas of ``primary``, as a live node's ``CLUSTER NODES`` lists them."""
        view = primary if primary.live else self._seed()
        return [self._by_id(f[0]) for f in self._cluster_nodes(view)
                if f[3] == primary.node_id and "fail" not in f[2].split(",")]

    def replica_of(self, primary: ClusterNode) -> ClusterNode:
        replicas = self.replicas_of(primary)
        if not replicas:
            raise LookupError(f"{primary} has no replica")
        return replicas[0]

    # -- health ---------------------------------------------------------------------------
    def _healthy(self, replicas_per_primary: int | None) -> bool:
        live = self._live()
        roles = {n.node_id: n.command("ROLE") for n in live}
        # The truth, from each live node itself: its primary's id ("-" for a primary).
        truth: dict[str, str] = {}
        for node in live:
            role = roles[node.node_id]
            if text(role[0]) == "master":
                truth[node.node_id] = "-"
                continue
            upstream = self._by_address(text(role[1]), int(role[2]))
            if upstream.live and text(role[3]) != "connected":
                return False  # a replica of a live primary is still syncing
            truth[node.node_id] = upstream.node_id
        masters = {n.address for n in live if truth[n.node_id] == "-"}
        for node in live:
            if "cluster_state:ok" not in text(node.command("CLUSTER", "INFO")):
                return False
            # This node sees every live node up, connected, and in its true role.
            for f in self._cluster_nodes(node):
                if f[0] in truth and (f[7] != "connected" or f[3] != truth[f[0]]
                                      or {"fail", "fail?", "handshake"} & set(f[2].split(","))):
                    return False
            covered = 0
            for lo, hi, primary, replicas in self._slot_map(node):
                if primary not in masters:
                    return False
                if replicas_per_primary is not None and len(replicas) != replicas_per_primary:
                    return False
                covered += hi - lo + 1
            if covered != SLOTS:
                return False
        return True

    def _wait_agreed(self, timeout: float, replicas_per_primary: int | None = None) -> None:
        _wait("a healthy cluster", lambda: self._healthy(replicas_per_primary), timeout)

    def wait_healthy(self, timeout: float = 30.0) -> float:
        """Wait until every live node says ``cluster_state:ok``, every slot (in every live
        node's view) is served by a live node that says it is a primary, and every replica
        of a live primary is in sync. Returns the seconds waited."""
        t0 = time.monotonic()
        self._wait_agreed(timeout)
        return time.monotonic() - t0

    # -- faults ---------------------------------------------------------------------------
    def kill_node(self, node: ClusterNode) -> None:
        """SIGKILL the node's process (by pid); :meth:`restart_node` brings it back."""
        node.server.kill()
        node.paused = False

    def pause_node(self, node: ClusterNode) -> None:
        """SIGSTOP the node: it holds its sockets open but answers nothing."""
        node.server.pause()
        node.paused = True

    def resume_node(self, node: ClusterNode) -> None:
        node.server.resume()
        node.paused = False

    def restart_node(self, node: ClusterNode) -> ClusterNode:
        """Start a killed node again (or stop and start a running one) on the same port and
        data directory, so it keeps its node id; call :meth:`wait_healthy` to wait for it."""
        if node.paused:
            self.resume_node(node)
        node.server.stop()
        self._start_process(node)
        return node

    def failover(self, replica: ClusterNode, timeout: float = 30.0, force: bool = False) -> float:
        """``CLUSTER FAILOVER`` (``FORCE`` if asked) on ``replica``; wait until it is a primary
        and the cluster is healthy again. Returns the seconds taken."""
        t0 = time.monotonic()
        deadline = t0 + timeout
        while True:
            replica.command("CLUSTER", "FAILOVER", *(["FORCE"] if force else []))
            try:  # the server gives a manual failover 5 s, then drops it: ask again
                _wait(f"{replica} promoted", lambda: replica.role == "primary",
                      min(6.0, max(0.0, deadline - time.monotonic())))
                break
            except ServerUnavailable:
                if time.monotonic() >= deadline:
                    raise
        self._wait_agreed(max(0.0, deadline - time.monotonic()))
        return time.monotonic() - t0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m echomq.servers.local_cluster",
                                     description="Run a local Valkey Cluster until Ctrl-C.")
    parser.add_argument("--primaries", type=int, default=3)
    parser.add_argument("--replicas", type=int, default=1, help="replicas per primary")
    parser.add_argument("--node-timeout-ms", type=int, default=2000)
    parser.add_argument("--dir", default=None, help="data directory (default: a temporary one)")
    args = parser.parse_args(argv)
    done = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    with LocalCluster(args.primaries, args.replicas, args.node_timeout_ms, args.dir) as cluster:
        print(f"local Valkey cluster up in {cluster.startup_seconds:.2f}s ({cluster.base_dir})")
        for node in cluster.nodes:
            print(f"  {node.host}:{node.port}  {node.role:<8} pid={node.pid} id={node.node_id}")
        print(f"seed: {cluster.url}")
        print("startup nodes: " + ",".join(f"{h}:{p}" for h, p in cluster.startup_nodes))
        print("Ctrl-C or SIGTERM stops it.", flush=True)
        while not done.wait(0.5):  # short waits: the signal handler runs between them
            pass
        print("stopping...", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
