# Generated from echomq/client/_async/cluster.py by scripts/unasync_gen.py. Do not edit.
"""The cluster connector: every call routed by the slot the client computes (docs/cluster.md).

:class:`ClusterConnector` keeps the cluster's slot map (``CLUSTER SLOTS``) and one
single-node :class:`Connector` per primary, built with a zero retry budget so it
makes exactly one attempt. This class owns redirection and the retry budget; the node
connector owns one node's EVALSHA-first / NOSCRIPT-load path and its pipeline. Script
caches are per node, so NOSCRIPT is recovered on the node that answered it (after a
failover the promoted replica answers NOSCRIPT to its first EVALSHA).

* A call's slot is ``slot(KEYS[1])``; every key of an EchoMQ call carries the queue's
  hash tag, so one node serves the whole call.
* ``MOVED``: the slot is recorded at its new owner, the map is refreshed on the next
  call, and the call is sent there at once. ``ASK``: ``ASKING`` plus the call, once, on
  the importing node (same connection), without touching the map.
* Connection errors, timeouts, CLUSTERDOWN, TRYAGAIN, READONLY, MASTERDOWN: the map is
  refreshed and the call sent again with capped backoff until ``retry_budget_s`` (10 s
  by default: a kill -9 failover took 3.2–4.7 s with a 2 s node timeout) is spent, then
  :class:`ServerUnavailable`. Every EchoMQ script is safe to resend.
* A pipeline over several queues is split by node; replies come back in input order.
  Only the items of a node that failed (or were redirected) are sent again.
See docs/decisions/0006-cluster-connector.md for why this is not redis-py's RedisCluster.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Sequence
from typing import Any

from redis import exceptions as rex

from echomq.client import _edge
from echomq.client._sync.connector import Call, Connector, Read, check_calls, is_transient
from echomq.client._sync.shard_subscription import ShardSubscription
from echomq.core.backoff import BackoffDelays
from echomq.core.cluster_url import Addr, parse_cluster_url
from echomq.core.errors import EchoMQError, InvalidArgument, ServerUnavailable
from echomq.protocol import keyspace
from echomq.protocol.decoders import text
from echomq.protocol.scripts import Script

# Jitter from a generator of our own: a library never draws from (or perturbs) the
# process-wide `random` state its users and their test tools rely on.
_rng = random.Random()

__all__ = ["ClusterConnector", "parse_cluster_url"]

# Commands without a key go to any primary (TIME, SCRIPT LOAD, ...); the rest by args[1].
_KEYLESS = frozenset({"TIME", "PING", "INFO", "SCRIPT", "CLUSTER", "WAIT", "DBSIZE", "ROLE",
                      "CONFIG", "FLUSHALL", "FLUSHDB", "ECHO", "LASTSAVE"})
_MAX_REDIRECTS = 16  # a slot migrating back and forth; more than this is a broken cluster
# Backoff cap: a failover completes 3-5 s after the primary dies, and every 0.25 s of cap
# is up to 0.25 s of outage the application sees after the promotion.
_MAX_DELAY = 0.25


def _retryable(exc: BaseException) -> bool:
    return is_transient(exc) or isinstance(exc, ServerUnavailable)


_FAILED_FOR_S = 10.0  # a failover takes 2-5 s; a node failed longer ago is tried in turn again


class ClusterConnector:
    """A Valkey Cluster reached through its seed nodes; a
    :class:`~echomq.client._sync.seam.ScriptConnector`, as :class:`Connector` is."""

    def __init__(
        self,
        seeds: Sequence[Addr],
        *,
        retry_budget_s: float = 10.0,
        socket_timeout: float | None = 5.0,
        max_connections: int | None = None,
        scheme: str = "redis",
        userinfo: str = "",
    ) -> None:
        if not seeds:
            raise InvalidArgument("a cluster connector needs at least one seed node")
        self.seeds: list[Addr] = [(h, int(p)) for h, p in seeds]
        self.retry_budget_s = retry_budget_s
        self._socket_timeout = socket_timeout
        self._max_connections = max_connections
        self._scheme = scheme
        self._auth = f"{userinfo}@" if userinfo else ""
        self._nodes: dict[Addr, Connector] = {}
        self._nodes_lock = threading.Lock()  # the blocking copy is shared by threads
        self._slots: list[Addr | None] = []  # empty until the first call (no I/O before)
        self._stale = True
        # Nodes that failed to answer CLUSTER SLOTS, and when: asked last for a while, so
        # that while one primary is down every refresh (after any call of its slots failed)
        # does not wait on it first; the other primaries' calls keep their speed.
        self._failed_at: dict[Addr, float] = {}

    @classmethod
    def from_url(cls, url: str, *, retry_budget_s: float = 10.0,
                 socket_timeout: float | None = 5.0,
                 max_connections: int | None = None) -> ClusterConnector:
        """Connect lazily to the cluster named by ``url`` (see :func:`parse_cluster_url`)."""
        scheme, userinfo, seeds = parse_cluster_url(url)
        return cls(seeds, retry_budget_s=retry_budget_s, socket_timeout=socket_timeout,
                   max_connections=max_connections, scheme=scheme, userinfo=userinfo)

    def close(self) -> None:
        with self._nodes_lock:
            nodes, self._nodes = list(self._nodes.values()), {}
        failed: BaseException | None = None
        for node in nodes:  # every node's connections, whatever one of them raised
            try:
                node.close()
            except Exception as exc:
                failed = failed or exc
        if failed is not None:
            raise failed

    def __enter__(self) -> ClusterConnector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ the map
    def node(self, addr: Addr) -> Connector:
        """The one-attempt connector of the node at ``addr`` (created on first use)."""
        node = self._nodes.get(addr)
        if node is None:
            if not (isinstance(addr, tuple) and len(addr) == 2 and isinstance(addr[0], str)
                    and isinstance(addr[1], int) and not isinstance(addr[1], bool)):
                raise InvalidArgument(f"a node address is (host, port), not {addr!r}")
            with self._nodes_lock:
                node = self._nodes.get(addr)
                if node is None:
                    host = f"[{addr[0]}]" if ":" in addr[0] else addr[0]
                    node = Connector.from_url(
                        f"{self._scheme}://{self._auth}{host}:{addr[1]}", retry_budget_s=0.0,
                        socket_timeout=self._socket_timeout, max_connections=self._max_connections)
                    self._nodes[addr] = node
        return node

    @property
    def primaries(self) -> list[Addr]:
        """The primaries of the last slot map read, in slot order."""
        return list(dict.fromkeys(a for a in self._slots if a is not None))

    def refresh(self) -> None:
        """Read the slot map from the first node that answers (primaries first, then seeds)."""
        with _edge.mapped():
            self._refresh()

    def _refresh(self) -> None:
        last: BaseException | None = None
        recent = time.monotonic() - _FAILED_FOR_S
        order = sorted(dict.fromkeys([*self.primaries, *self._nodes, *self.seeds]),
                       key=lambda a: self._failed_at.get(a, 0.0) > recent)  # stable: failed last
        for addr in order:
            try:
                reply = self.node(addr)._command("CLUSTER", "SLOTS")
            except Exception as exc:
                if not _retryable(exc):
                    raise
                self._failed_at[addr] = time.monotonic()
                last = exc
                continue
            self._failed_at.pop(addr, None)
            table: list[Addr | None] = [None] * keyspace.SLOTS
            for entry in reply:
                host, port = text(entry[2][0]) or addr[0], int(entry[2][1])
                table[int(entry[0]) : int(entry[1]) + 1] = [(host, port)] * (
                    int(entry[1]) - int(entry[0]) + 1)
            self._slots, self._stale = table, False
            return
        raise ServerUnavailable(f"no cluster node answered CLUSTER SLOTS: {last!r}") from last

    def _primary(self, slot: int) -> Connector:
        if self._stale or not self._slots:
            self._refresh()
        addr = self._slots[slot]
        if addr is None:  # transient: the slot is being failed over or was never assigned
            self._stale = True
            raise rex.ClusterDownError(f"CLUSTERDOWN slot {slot} is not served (client view)")
        return self.node(addr)

    def node_for_key(self, key: str | bytes) -> Addr:
        """The address of the primary serving ``key``'s slot (in the client's map)."""
        with _edge.mapped():
            node = self._primary(keyspace.slot(key))
        for addr, conn in self._nodes.items():
            if conn is node:
                return addr
        raise LookupError(key)  # pragma: no cover - _primary always registers the node

    def _learn(self, exc: rex.AskError) -> None:
        if self._slots:
            self._slots[exc.slot_id] = (exc.host, exc.port)
        self._stale = True  # a MOVED usually means a failover: the other slots moved too

    # ------------------------------------------------------------------ retries
    def _retrying(self, op: Any, *args: Any) -> Any:
        deadline = time.monotonic() + self.retry_budget_s
        delays = BackoffDelays(0.02, _MAX_DELAY, jitter=(0.5, 1.5))
        redirects = 0
        while True:
            try:
                return op(*args)
            except rex.MovedError as exc:
                self._learn(exc)
                redirects += 1
                if redirects <= _MAX_REDIRECTS:
                    continue
                failure: BaseException = exc
            except Exception as exc:
                if not _retryable(exc):
                    raise
                failure = exc
            self._stale = True
            if time.monotonic() + delays.step > deadline:
                raise ServerUnavailable(
                    f"cluster unavailable for {self.retry_budget_s}s: {failure!r}") from failure
            time.sleep(next(delays))

    def _asking(self, exc: rex.AskError, call: Call | None, read: Read = ()) -> Any:
        """One call (or plain command) on the node importing the slot, preceded by ASKING
        on its connection (the node's one send path, NOSCRIPT included)."""
        node = self.node((exc.host, exc.port))
        out: list[Any] = []
        rounds = node._send([call] if call else [], [] if call else [read], None, True,
                                  False, out)
        reply = out[0] if call else rounds[-1][0]
        if isinstance(reply, Exception):
            raise reply
        return reply

    # ------------------------------------------------------------------ calls
    def command(self, *args: Any) -> Any:
        """One plain command, routed by its first key (keyless ones to any primary)."""
        with _edge.mapped():
            return self._retrying(self._command_once, args)

    def _command_once(self, args: Sequence[Any]) -> Any:
        if text(args[0]).upper() in _KEYLESS or len(args) < 2:
            if self._stale or not self._slots:
                self._refresh()
            primaries = self.primaries
            if not primaries:
                raise rex.ClusterDownError("CLUSTERDOWN no slot is served (client view)")
            node = self.node(_rng.choice(primaries))
        else:
            node = self._primary(keyspace.slot(args[1]))
        try:
            return node._command(*args)
        except rex.MovedError:
            raise
        except rex.AskError as exc:
            return self._asking(exc, None, args)

    def load(self, script: Script) -> None:
        """``SCRIPT LOAD`` on every primary, best effort: NOSCRIPT recovery covers the rest."""
        with _edge.mapped():
            try:
                if self._stale or not self._slots:
                    self._refresh()
            except ServerUnavailable:
                return
            for addr in self.primaries:
                try:
                    self.node(addr)._command("SCRIPT", "LOAD", script.source)
                except Exception as exc:
                    if not _retryable(exc):
                        raise
                    self._stale = True

    def eval(self, script: Script, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        """Run one script EVALSHA-first on the node serving ``slot(KEYS[1])``."""
        script.check(len(keys), len(args))
        with _edge.mapped():
            return self._retrying(self._eval_once, script, keys, args)

    def _eval_once(self, script: Script, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        node = self._primary(keyspace.slot(keys[0]) if keys else 0)
        try:
            return node._eval(script, keys, args)
        except rex.MovedError:
            raise
        except rex.AskError as exc:
            return self._asking(exc, Call(script, keys, args))

    def run(self, call: Call) -> Any:
        """Run one :class:`Call`: :meth:`eval` of its script, KEYS and ARGV."""
        return self.eval(call.script, call.keys, call.args)

    def pipeline(self, calls: Sequence[Call], *, flush: int | None = None) -> list[Any]:
        """Run many script calls, grouped by node; replies (or error replies) in input order.

        Each node's group is one pipeline on that node (flushes of ``flush`` calls). A
        group whose node fails is sent again as a whole; its calls are idempotent or
        fenced, and an admission's or finish's resend answers what its first send earned
        (its call token: docs/protocol.md, "Call tokens").
        """

        def run(node: Connector, group: list[Call]) -> tuple[list[Any], list[int]]:
            return node._pipeline(group, flush), []

        check_calls(calls)
        with _edge.mapped():
            replies, _ = self._grouped(calls, run)
            return _edge.replies(replies)

    def flush(self, calls: Sequence[Call], reads: Sequence[Read] = ()) -> list[Any]:
        """Script calls, then plain read commands; replies in order (see Connector.flush).

        On a cluster the calls go as one pipeline per node and the reads follow one by one.
        """
        check_calls([r for r in reads if isinstance(r, Call)])
        replies = self.pipeline(calls) if calls else []
        for read in reads:
            try:
                if isinstance(read, Call):
                    replies.append(self.eval(read.script, read.keys, read.args))
                else:
                    replies.append(self.command(*read))
            except EchoMQError as exc:
                replies.append(exc)
        return replies

    def pipeline_wait(self, calls: Sequence[Call], *, replicas: int,
                            timeout_ms: int) -> tuple[list[Any], list[int]]:
        """Run calls, then ``WAIT replicas timeout_ms`` on each node, on the connection
        that sent them. Returns the replies and, per call, how many replicas of its node
        acknowledged its writes."""

        def run(node: Connector, group: list[Call]) -> tuple[list[Any], list[int]]:
            return node._pipeline_wait(group, replicas, timeout_ms)

        check_calls(calls)
        with _edge.mapped():
            replies, acked = self._grouped(calls, run)
            return _edge.replies(replies), acked

    def _grouped(self, calls: Sequence[Call], run: Any) -> tuple[list[Any], list[int]]:
        out: list[Any] = [None] * len(calls)
        acked: list[int] = [0] * len(calls)
        todo = list(range(len(calls)))
        deadline = time.monotonic() + self.retry_budget_s
        delays = BackoffDelays(0.02, _MAX_DELAY, jitter=(0.5, 1.5))
        redirects = 0
        while todo:
            todo, failure = self._round(calls, todo, out, acked, run)
            if not todo:
                break
            if failure is None:  # only redirections: send again at once
                redirects += 1
                if redirects <= _MAX_REDIRECTS:
                    continue
                failure = ServerUnavailable("too many cluster redirections")
            self._stale = True
            if time.monotonic() + delays.step > deadline:
                raise ServerUnavailable(
                    f"cluster unavailable for {self.retry_budget_s}s: {failure!r}") from failure
            time.sleep(next(delays))
        return out, acked

    def _round(self, calls: Sequence[Call], todo: list[int], out: list[Any],
                     acked: list[int], run: Any) -> tuple[list[int], BaseException | None]:
        """Send the ``todo`` calls once, node by node; returns what must be sent again."""
        groups: dict[int, tuple[Connector, list[int]]] = {}
        try:
            for i in todo:
                keys = calls[i].keys
                node = self._primary(keyspace.slot(keys[0]) if keys else 0)
                groups.setdefault(id(node), (node, []))[1].append(i)
        except Exception as exc:
            if not _retryable(exc):
                raise
            return todo, exc
        again: list[int] = []
        failure: BaseException | None = None
        for node, idxs in groups.values():
            try:
                replies, counts = run(node, [calls[i] for i in idxs])
            except Exception as exc:
                if not _retryable(exc):
                    raise
                failure = exc
                again += idxs
                continue
            for n, (i, reply) in enumerate(zip(idxs, replies, strict=True)):
                if isinstance(reply, rex.MovedError):
                    self._learn(reply)
                    again.append(i)
                    continue
                if isinstance(reply, rex.AskError):
                    try:
                        reply = self._asking(reply, calls[i])
                    except rex.ResponseError as exc:
                        if _retryable(exc):
                            failure = exc
                            again.append(i)
                            continue
                        reply = exc
                elif isinstance(reply, Exception) and _retryable(reply):
                    failure = reply
                    again.append(i)
                    continue
                out[i] = reply
                if counts:
                    acked[i] = counts[n]
        return sorted(again), failure

    # ------------------------------------------------------------------ the rest
    def server_time_ms(self) -> int:
        """A primary's clock in milliseconds (for tests and diagnostics, never for leases)."""
        sec, usec = self.command("TIME")
        return int(sec) * 1000 + int(usec) // 1000

    def wake_subscription(self, channel: str) -> ShardSubscription:
        """``SSUBSCRIBE channel`` on the primary owning its slot. The subscription raises
        when that node is lost or gives the slot up; subscribe again then."""
        with _edge.mapped():
            try:
                node = self._primary(keyspace.slot(channel))
                pubsub = node.client.pubsub()
                pubsub.ssubscribe(channel)
            except Exception:
                self._stale = True
                raise
        return ShardSubscription(pubsub, self._mark_stale)

    def _mark_stale(self) -> None:
        self._stale = True

