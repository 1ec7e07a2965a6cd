# Generated from echomq/client/_async/flows.py by scripts/unasync_gen.py. Do not edit.
"""Flows: a parent job released exactly once when its children, in any queues, have ended.

The protocol is docs/decisions/0038-flows.md and docs/protocol.md, "Flows". In short:

* **Admission** holds every child first (``flow_hold``: its row, not claimable, names its
  parent), then admits the parent *waiting* (``flow_admit``: the commit marker, with one
  field per child), then starts the children (``flow_start``). A crash before the
  parent's row leaves held children only; :meth:`Flows.repair` (upkeep) later drops
  them after writing a tombstone that refuses the late parent, or starts them when the parent
  exists. No child is ever runnable without its parent. A refused admission (a child id
  taken by another job, a tombstoned parent) leaves its held children to the repair.
* **Settling.** Every script that ends a child (complete, complete_batch, retry to dead or
  cancelled, reap, cancel, expire) settles a parent of the same queue itself (decision
  0041), and for a parent of another queue records a notice in the child's own slot (the
  hash ``emq:{q}:finished``). :meth:`Flows.relay` carries each notice to the parent's slot
  (``flow_parent settle``: the child's field records its outcome once; the last one moves the
  parent waiting -> pending), then deletes the notice (``flow_child ack``). A relay killed
  between the two repeats the settle, which changes nothing: exactly once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from echomq.client._sync.seam import ScriptConnector
from echomq.core.errors import EchoMQError, InvalidArgument, ProtocolVersionError
from echomq.protocol import cancel as cancel_call
from echomq.protocol import decoders as d
from echomq.protocol import flows as f
from echomq.protocol import row as row_call
from echomq.protocol.calls import Call
from echomq.protocol.flows import MAX_DEPTH, PLAIN, FlowSpec, StepOptions, walk
from echomq.protocol.keyspace import QueueKeys

__all__ = [
    "Child",
    "FlowAbandoned",
    "FlowNode",
    "FlowSpec",
    "Flows",
    "RelayReport",
    "StepOptions",
]

REPAIR_AFTER_MS = 60_000
"""A held child older than this is repaired: its admission is deemed dead (decision 0038)."""
RELAY_BATCH = 128
"""Notices one relay step reads (HSCAN COUNT) from one queue."""


class FlowAbandoned(EchoMQError):
    """The flow's parent was tombstoned by the repair before it was admitted (its admission
    took longer than the repair bound): nothing of the flow runs; admit it again, new ids."""


@dataclass(frozen=True, slots=True)
class FlowNode:
    """One job of a flow as read now: its queue, id, state and, for a child, the outcome
    its parent recorded ('' while unsettled); result and error as its row keeps them."""

    queue: str
    id: str
    state: str
    outcome: str = ""
    result: bytes | None = None
    error: str = ""


@dataclass(frozen=True, slots=True)
class RelayReport:
    relayed: int = 0  # notices delivered and deleted
    released: int = 0  # parents this step moved waiting -> pending
    failed: int = 0  # parents this step failed (policy 'fail')


Child = tuple[str, str, bytes] | tuple[str, str, bytes, StepOptions]
"""A child of :meth:`Flows.admit`: (queue, id, payload), and its own options if any."""


def _ok(reply: object) -> int:
    return int(d._raise_if_error(reply))


def _child(child: Child, expires_ms: int | None) -> FlowSpec:
    """One child of :meth:`Flows.admit` as a leaf (its options checked by ``walk``)."""
    if not isinstance(child, tuple | list) or len(child) not in (3, 4):
        raise InvalidArgument("a child of a flow is (queue, id, payload) or (queue, id, payload, "
                              f"StepOptions), not {child!r}")
    return FlowSpec(child[0], child[1], child[2], expires_ms=expires_ms,
                    options=child[3] if len(child) == 4 else PLAIN)


class Flows:
    """The flow verbs over one connector (every queue it reaches)."""

    def __init__(self, connector: ScriptConnector) -> None:
        self.connector = connector
        self._cursors: dict[str, int] = {}  # the relay's HSCAN cursor per queue

    def admit(self, queue: str, parent: tuple[str, bytes], children: Sequence[Child], *,
                    on_child_failure: str = "fail", expires_ms: int | None = None,
                    options: StepOptions = PLAIN) -> bool:
        """Admit a flow: ``parent`` = (id, payload) in ``queue``, ``children`` = (queue, id,
        payload) each, or (queue, id, payload, StepOptions) for a child with options of its
        own (lane, serial, priority, attempts, timeout, delay: applied when it starts);
        ``options`` are the parent's (applied when it is released). True when admitted,
        False when this exact flow was admitted before (a retry). ``expires_ms``: every
        child's deadline to start by, from this admission (a child past it ends expired: a
        failed child; decision 0045). Every argument is checked before the first write."""
        pid, payload = parent
        return self.admit_tree(FlowSpec(queue, pid, payload, tuple(
            _child(c, expires_ms) for c in children), on_child_failure, options=options))

    def admit_tree(self, root: FlowSpec) -> bool:
        """Admit a flow whose children may be parents themselves (a chain, a chord): the
        leaves held, the inner parents admitted waiting (each naming its own parent), then
        the root (the commit marker), then the leaves started. True when admitted, False when
        this exact flow was admitted before (a retry). Checked whole before the first write."""
        leaves, inner = walk(root)
        pmember = f.member(root.id, root.queue)
        admit = f.flow_admit(QueueKeys.of(root.queue), root.id, root.payload,
                             policy=root.on_child_failure,
                             children=[f.member(c.id, c.queue) for c in root.children],
                             options=root.options)
        holds = [f.flow_hold(QueueKeys.of(c.queue), c.id, c.payload, up, expires_ms=c.expires_ms,
                             options=c.options)
                 for c, up in leaves]
        waits = [f.flow_admit(QueueKeys.of(c.queue), c.id, c.payload, policy=c.on_child_failure,
                              children=[f.member(g.id, g.queue) for g in c.children], parent=up,
                              options=c.options)
                 for c, up in inner]
        seen = [pmember] + [f.member(c.id, c.queue) for c, _ in leaves + inner]
        if len(set(seen)) != len(seen):
            raise InvalidArgument("a flow names each job once")
        for (c, up), reply in zip(leaves + inner, self.connector.pipeline(holds + waits),
                                  strict=True):
            if _ok(reply) == 0:  # a duplicate: ours (a retry) or another job's id
                row = self._row(c.queue, c.id)
                if row is None or d.text(row.get("parent", b"")) != up:
                    # the children held so far stay held, never runnable: the parent is not
                    # admitted, so the repair drops them (a producer deletes nothing)
                    raise InvalidArgument(f"child {f.member(c.id, c.queue)} is an existing "
                                          "job, not of this flow")
        fresh = _ok(self.connector.run(admit)) == 1
        if not fresh:
            prow = self._row(root.queue, root.id)
            if prow is None or d.text(prow.get("state", b"")) == "cancelled":
                raise FlowAbandoned(f"flow {pmember} was abandoned by the repair; admit it anew")
        self.connector.pipeline([f.flow_start(QueueKeys.of(c.queue), c.id)
                                       for c, _ in leaves])
        return fresh

    def _row(self, queue: str, job_id: str) -> dict[str, bytes] | None:
        return d.decode_row(self.connector.run(row_call(QueueKeys.of(queue), job_id)))

    def relay(self, queue: str, *, count: int = RELAY_BATCH) -> RelayReport:
        """One relay step for the notices of children of ``queue``: each is settled in its
        parent's slot, then deleted here. Safe to run by many processes at once.

        The settles of one step go out as one pipeline, then the acks of those settled as
        another (two round trips for up to ``count`` notices). The scan resumes where this
        relay's last step ended, so relays running at once mostly read different notices
        (a repeat is harmless: the settle is a field check)."""
        k = QueueKeys.of(queue)
        cursor = self._cursors.get(queue, 0)
        reply = d._raise_if_error(self.connector.command("HSCAN", k.finished, cursor,
                                                               "COUNT", count))
        if not isinstance(reply, list | tuple) or len(reply) != 2:
            return RelayReport()
        self._cursors[queue] = int(reply[0])
        notes = reply[1]
        if isinstance(notes, list):  # a flat field/value array (RESP without redis-py's parsing)
            notes = dict(zip(notes[::2], notes[1::2], strict=True))
        items: list[tuple[str, bytes, Call | None]] = []
        for raw_id, note in notes.items():
            cid = d.text(raw_id)
            outcome, _, parent = d.text(note).partition(":")
            pid, pq = f.split_member(parent)
            try:
                call: Call | None = f.flow_parent(QueueKeys.of(pq), "settle", pid,
                                                  f.member(cid, queue), outcome)
            except InvalidArgument:  # a notice naming no valid parent: dropped below
                call = None
            items.append((cid, note, call))
        if not items:
            return RelayReport()
        sent = iter(self.connector.pipeline([c for _, _, c in items if c is not None]))
        released = failed = 0
        acks: list[Call] = []
        for cid, note, call in items:
            try:
                verdict = 0 if call is None else _ok(next(sent))
            except InvalidArgument:
                verdict = 0  # a notice no parent can take: dropped below
            except ProtocolVersionError:
                continue  # the parent's queue speaks another major version: kept for later
            released += verdict == 2
            failed += verdict == 3
            acks.append(f.flow_child(k, "ack", cid, note))
        relayed = sum(_ok(r) for r in self.connector.pipeline(acks)) if acks else 0
        return RelayReport(relayed, released, failed)

    def repair(self, queue: str, *, older_than_ms: int = REPAIR_AFTER_MS,
                     count: int = 64) -> tuple[int, int]:
        """Finish or undo half-admitted flows: each child of ``queue`` held longer than
        ``older_than_ms`` is started if its parent exists, else its parent is tombstoned and
        the child dropped. Returns (started, dropped)."""
        k = QueueKeys.of(queue)
        now = self.connector.server_time_ms()
        ids = d._raise_if_error(self.connector.command(
            "ZRANGEBYSCORE", k.held, "-inf", now - older_than_ms, "LIMIT", 0, count))
        started = dropped = 0
        for raw in ids:
            cid = d.text(raw)
            row = self._row(queue, cid)
            if row is None or d.text(row.get("state", b"")) != "held":
                continue
            if self._committed(d.text(row.get("parent", b""))):
                started += _ok(self.connector.run(f.flow_start(k, cid)))
            else:
                dropped += _ok(self.connector.run(f.flow_child(k, "drop", cid)))
        return started, dropped

    def _committed(self, up: str) -> bool:
        """Whether the flow above a held child committed: its parent and every ancestor
        exist, up to the root (the commit marker). The first missing one is tombstoned
        (``abandon``) and the waiting parents below it are cancelled: the flow is undone."""
        below: list[tuple[str, str]] = []
        for _ in range(MAX_DEPTH):
            pid, pq = f.split_member(up)
            if _ok(self.connector.run(f.flow_parent(QueueKeys.of(pq), "abandon", pid))):
                for q, job_id in below:  # inner parents of a flow that never committed
                    _ok(self.connector.run(f.flow_parent(QueueKeys.of(q), "cancel", job_id)))
                return False
            row = self._row(pq, pid) or {}
            up = d.text(row.get("parent", b""))
            if not up or d.text(row.get("state", b"")) != "waiting":
                return True
            below.append((pq, pid))
        return True

    def cancel(self, queue: str, parent_id: str) -> bool:
        """Cancel a flow: a waiting parent ends cancelled (else it is cancelled as any job);
        held children are dropped, waiting ones cancelled, running ones asked to stop.
        True when the parent was still waiting."""
        pk = QueueKeys.of(queue)
        waiting = _ok(self.connector.run(f.flow_parent(pk, "cancel", parent_id))) == 1
        if not waiting:
            d._raise_if_error(self.connector.run(cancel_call(pk, [parent_id])))
        calls: list[Call] = []
        for node in self.children(queue, parent_id):
            if node.state == "waiting":  # an inner parent (a nested flow): its own children
                self.cancel(node.queue, node.id)
                continue
            ck = QueueKeys.of(node.queue)
            calls += [f.flow_child(ck, "drop", node.id), cancel_call(ck, [node.id])]
        for reply in self.connector.pipeline(calls) if calls else []:
            d._raise_if_error(reply)
        return waiting

    def children(self, queue: str, parent_id: str) -> list[FlowNode]:
        """The parent's children in admission order, each as its row reads now (state
        'gone' once retention removed it) with the outcome the parent recorded."""
        prow = self._row(queue, parent_id)
        if prow is None:
            return []
        out = []
        for field, value in prow.items():
            if not field.startswith("c:"):
                continue
            cid, cq = f.split_member(field[2:])
            row = self._row(cq, cid) or {}
            out.append(FlowNode(cq, cid, d.text(row.get("state", b"gone")), d.text(value),
                                row.get("result"), d.text(row.get("error", b""))))
        return out

    def node(self, queue: str, job_id: str) -> FlowNode | None:
        """One job as a flow node (the parent of a tree), or None."""
        row = self._row(queue, job_id)
        if row is None:
            return None
        return FlowNode(queue, job_id, d.text(row.get("state", b"")), "", row.get("result"),
                        d.text(row.get("error", b"")))
