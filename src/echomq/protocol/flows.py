"""Script calls of flows (docs/decisions/0038-flows.md), pure: named parameters in, a Call out.

A flow is a parent job waiting for its children, which may live in any queues (any cluster
slots). Members name a child as ``<child id>:<child queue>``, a parent as
``<parent id>:<parent queue>`` (ids are fixed-length branded ids without ``:``, so the
first ``:`` splits them). Each builder is checked against its script's header at import.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from echomq.core import ids
from echomq.core.bounds import MAX_ATTEMPTS, MAX_DELAY_MS, check_expiry, check_int
from echomq.core.errors import InvalidArgument, InvalidJobId
from echomq.protocol.calls import Call, layout
from echomq.protocol.codes import check_lane
from echomq.protocol.gate import check_priority
from echomq.protocol.keyspace import QueueKeys, check_queue

__all__ = ["MAX_DEPTH", "POLICIES", "FlowSpec", "Policy", "StepOptions", "flow_admit",
           "flow_child", "flow_hold", "flow_parent", "flow_start", "member", "split_member",
           "walk"]

Policy = Literal["fail", "continue", "ignore"]
POLICIES: tuple[str, ...] = ("fail", "continue", "ignore")
MAX_DEPTH = 64
"""Levels of a nested flow, at most (a chain of N steps nests N - 1 levels)."""
MAX_CHILDREN = 10_000
"""Children of one parent, at most (one admission script carries them all)."""


def member(job_id: str, queue: str) -> str:
    """``<id>:<queue>``: how a flow names a job of another queue; refuses bad input."""
    if not isinstance(job_id, str) or not ids.valid(job_id):
        raise InvalidJobId(f"not a branded id: {job_id!r}")
    return f"{job_id}:{check_queue(queue)}"


def split_member(text: str) -> tuple[str, str]:
    """``(id, queue)`` of a member ``<id>:<queue>``."""
    job_id, _, queue = text.partition(":")
    return job_id, queue


@dataclass(frozen=True, slots=True, kw_only=True)
class StepOptions:
    """A flow job's own options, as :meth:`AsyncQueue.admit` takes them (decision 0041):
    ``lane`` ('' for none) and ``serial``, ``priority`` 0..3, ``max_attempts`` and
    ``timeout_ms`` (None: the consumer's), ``delay_ms`` counted from when the job becomes
    runnable (a child's start, a parent's release). Checked when built, before any I/O."""

    lane: str = ""
    delay_ms: int = 0
    serial: bool = False
    max_attempts: int | None = None
    priority: int = 0
    timeout_ms: int | None = None

    def __post_init__(self) -> None:
        check_lane(self.lane or None)
        check_int("delay_ms", self.delay_ms, 0, MAX_DELAY_MS)
        check_priority(self.priority)
        if not isinstance(self.serial, bool):
            raise InvalidArgument(f"serial must be a bool, not {type(self.serial).__name__}")
        if self.max_attempts is not None:
            check_int("max_attempts", self.max_attempts, 1, MAX_ATTEMPTS)
        if self.timeout_ms is not None:
            check_int("timeout_ms", self.timeout_ms, 1, MAX_DELAY_MS)

    def args(self) -> list[str | int]:
        """ARGV[3..9] of flow_hold and flow_admit: admit's places (the token unused)."""
        return [self.lane, self.delay_ms, "1" if self.serial else "0",
                "" if self.max_attempts is None else self.max_attempts, self.priority,
                "" if self.timeout_ms is None else self.timeout_ms, ""]


PLAIN = StepOptions()


@dataclass(frozen=True, slots=True)
class FlowSpec:
    """One job of a flow to admit (:meth:`AsyncFlows.admit_tree`): its queue, id, payload
    and children, each a FlowSpec (none for a leaf); ``on_child_failure`` is its policy
    when it has children ('fail', 'continue' or 'ignore'); ``expires_ms`` a leaf's deadline
    to start by, counted from the flow's admission (decision 0045; an expired leaf is a
    failed child); ``options`` its own options as a step (decision 0041)."""

    queue: str
    id: str
    payload: bytes
    children: tuple[FlowSpec, ...] = ()
    on_child_failure: str = "fail"
    expires_ms: int | None = None
    options: StepOptions = PLAIN


def walk(root: FlowSpec) -> tuple[list[tuple[FlowSpec, str]], list[tuple[FlowSpec, str]]]:
    """(leaves, inner parents) below ``root``, each with its parent's member; an inner
    parent comes after its own inner parents (deepest first)."""
    if not isinstance(root, FlowSpec) or not root.children:
        raise InvalidArgument("the root of a flow is a FlowSpec with children")
    leaves: list[tuple[FlowSpec, str]] = []
    inner: list[tuple[FlowSpec, str]] = []

    def visit(node: FlowSpec, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise InvalidArgument(f"a flow nests at most {MAX_DEPTH} levels")
        up = member(node.id, node.queue)
        if not isinstance(node.options, StepOptions):
            raise InvalidArgument(f"a flow job's options are StepOptions, not {node.options!r}")
        for child in node.children:
            if not isinstance(child, FlowSpec):
                raise InvalidArgument(f"a child of a flow is a FlowSpec, not {child!r}")
            if not isinstance(child.options, StepOptions):
                raise InvalidArgument(f"a flow job's options are StepOptions, not {child.options!r}")
            check_expiry(child.expires_ms, child.options.delay_ms)
            if child.children and child.expires_ms is not None:
                raise InvalidArgument("a deadline (expires_ms) is for a leaf of a flow, not a parent")
            if child.children:
                visit(child, depth + 1)
                inner.append((child, up))
            else:
                leaves.append((child, up))

    visit(root, 1)
    return leaves, inner


_OPTIONS = ("lane", "delay_ms", "serial", "max_attempts", "priority", "timeout_ms", "token")
_HOLD = layout("flow_hold", ("job", "held", "meta"),
               ("id", "payload", *_OPTIONS, "expires_ms", "parent"))


def flow_hold(k: QueueKeys, job_id: str, payload: bytes, parent: str, *,
              expires_ms: int | None = None, options: StepOptions = PLAIN) -> Call:
    check_expiry(expires_ms, options.delay_ms)
    return Call(_HOLD, [k.job(job_id), k.held, k.meta],
                [job_id, payload, *options.args(), "" if expires_ms is None else expires_ms,
                 parent])


_START = layout("flow_start", ("job", "held", "pending", "wake", "meta", "expiring", "lanes",
                               "delayed"), ("id",))


def flow_start(k: QueueKeys, job_id: str) -> Call:
    return Call(_START, [k.job(job_id), k.held, k.pending, k.wake, k.meta, k.expiring, k.lanes,
                         k.delayed], [job_id])


_CHILD = layout("flow_child", ("job", "held", "meta", "finished"), ("mode", "id", "note"))


def flow_child(k: QueueKeys, mode: Literal["drop", "ack"], job_id: str,
               note: bytes | str = "") -> Call:
    return Call(_CHILD, [k.job(job_id), k.held, k.meta, k.finished], [mode, job_id, note])


_ADMIT = layout("flow_admit", ("job", "waiting", "meta"),
                ("id", "payload", *_OPTIONS, "policy", "parent", "children"))


def flow_admit(k: QueueKeys, job_id: str, payload: bytes, *, policy: str,
               children: Sequence[str], parent: str = "", options: StepOptions = PLAIN) -> Call:
    if policy not in POLICIES:
        raise InvalidArgument(f"on_child_failure must be one of {POLICIES}, not {policy!r}")
    if not 1 <= len(children) <= MAX_CHILDREN:
        raise InvalidArgument(f"a flow has 1..{MAX_CHILDREN} children, not {len(children)}")
    if len(set(children)) != len(children):
        raise InvalidArgument("a flow names each child once")
    return Call(_ADMIT, [k.job(job_id), k.waiting, k.meta],
                [job_id, payload, *options.args(), policy, parent, *children])


_PARENT = layout("flow_parent", ("job", "waiting", "pending", "wake", "dead", "done", "meta",
                                 "finished", "delayed"), ("mode", "id", "child", "outcome"))


def flow_parent(k: QueueKeys, mode: Literal["settle", "abandon", "cancel"], job_id: str,
                child: str = "", outcome: str = "") -> Call:
    return Call(_PARENT, [k.job(job_id), k.waiting, k.pending, k.wake, k.dead, k.done, k.meta,
                          k.finished, k.delayed], [mode, job_id, child, outcome])
