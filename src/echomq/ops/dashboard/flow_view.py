"""The flow a job belongs to, as a tree on its job page (issue 27 item 5; decision 0038).

From the job the page walks up its ``parent`` fields to the root, then down each row's
``c:<child id>:<child queue>`` fields: every node links to its own job page and shows its
state and the outcome its parent recorded ('' while unsettled). Reads only; bounded: at
most :data:`MAX_NODES` rows are read for one page (a note says how many were left out).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import quote

from echomq.client._async.cluster import AsyncClusterConnector
from echomq.client._async.connector import AsyncConnector
from echomq.ops.dashboard.render import badge, esc
from echomq.protocol import decoders as d
from echomq.protocol import row as row_call
from echomq.protocol.flows import MAX_DEPTH, split_member
from echomq.protocol.keyspace import QueueKeys

__all__ = ["FlowTree", "flow_section", "flow_tree"]

Conn = AsyncConnector | AsyncClusterConnector
MAX_NODES = 200
"""Rows one page reads for a tree; a chord of 10,000 children shows its first 200."""


@dataclass(slots=True)
class FlowTree:
    queue: str
    id: str
    state: str
    outcome: str = ""  # what its parent recorded: done, dead, cancelled, or '' (not yet)
    policy: str = ""  # a parent's on_child_failure
    children: list[FlowTree] = field(default_factory=list)
    left_out: int = 0  # children not read (MAX_NODES)


async def _row(conn: Conn, queue: str, job_id: str) -> dict[str, bytes]:
    return d.decode_row(await conn.run(row_call(QueueKeys.of(queue), job_id))) or {}


async def flow_tree(conn: Conn, queue: str, job_id: str, row: dict[str, bytes]) -> FlowTree | None:
    """The whole flow of the job whose ``row`` is given, from its root; None if it is in none."""
    if "parent" not in row and "children" not in row:
        return None
    for _ in range(MAX_DEPTH):  # up to the root
        up = d.text(row.get("parent", b""))
        if not up:
            break
        job_id, queue = split_member(up)
        row = await _row(conn, queue, job_id)
    budget = [MAX_NODES]
    return await _down(conn, queue, job_id, row, "", budget)


async def _down(conn: Conn, queue: str, job_id: str, row: dict[str, bytes], outcome: str,
                budget: list[int]) -> FlowTree:
    node = FlowTree(queue, job_id, d.text(row.get("state", b"gone")), outcome,
                    d.text(row.get("policy", b"")))
    for name, value in row.items():
        if not name.startswith("c:"):
            continue
        if budget[0] <= 0:
            node.left_out += 1
            continue
        budget[0] -= 1
        cid, cq = split_member(name[2:])
        child = await _row(conn, cq, cid)
        node.children.append(await _down(conn, cq, cid, child, d.text(value), budget))
    return node


def _item(node: FlowTree, me: str) -> str:
    href = f"/queues/{quote(node.queue, safe='')}/jobs/{quote(node.id, safe='')}"
    here = ' class="me"' if node.id == me else ""
    outcome = f' <small>{esc(node.outcome)} for its parent</small>' if node.outcome else ""
    policy = f" <small>on a failed child: {esc(node.policy)}</small>" if node.policy else ""
    kids = "".join(_item(c, me) for c in node.children)
    if node.left_out:
        kids += f"<li><small>{node.left_out:,} more children not shown</small></li>"
    sub = f"<ul>{kids}</ul>" if kids else ""
    return (f'<li{here} data-id="{esc(node.id)}" data-state="{esc(node.state)}">{badge(node.state)} '
            f'<a class="mono" href="{esc(href)}">{esc(node.id)}</a> <small>{esc(node.queue)}</small>'
            f"{outcome}{policy}{sub}</li>")


def flow_section(tree: FlowTree, me: str) -> str:
    """The tree as nested lists (the page's own job marked)."""
    return f'<h2>Flow</h2><ul class="card flow-tree">{_item(tree, me)}</ul>'
