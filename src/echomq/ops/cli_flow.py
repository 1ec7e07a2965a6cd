"""``echomq flow QUEUE ID``: a flow as a tree, each node with its state (decision 0038).

    echomq flow QUEUE ID      the parent, then each child (and its children) with its state
                              and the outcome the parent recorded for it; exit 4: no such job

Registered on the ``echomq`` group by :mod:`echomq.ops.cli`. An expected failure is one line.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from echomq.client._async.flows import AsyncFlows, FlowNode
from echomq.ops.cli import _checked, _run_on

__all__ = ["flow", "tree_lines"]

MAX_DEPTH = 8  # nested flows shown this deep at most


async def tree_lines(flows: AsyncFlows, queue: str, job_id: str) -> list[str] | None:
    """The tree of the flow rooted at ``job_id`` of ``queue`` as lines, or None: no such job."""
    root = await flows.node(queue, job_id)
    if root is None:
        return None
    row = await flows._row(queue, job_id) or {}
    head = f"{job_id} ({queue}) {root.state}"
    if "children" in row:
        head += (f", {int(row.get('settled', b'0'))}/{int(row['children'])} children settled, "
                 f"on child failure: {row.get('policy', b'fail').decode()}")
    lines = [head]

    async def walk(node: FlowNode, prefix: str, last: bool, depth: int) -> None:
        said = f" [{node.outcome}]" if node.outcome else ""
        lines.append(f"{prefix}{'└── ' if last else '├── '}{node.id} ({node.queue}) {node.state}{said}")
        kids = await flows.children(node.queue, node.id) if depth < MAX_DEPTH else []
        for i, kid in enumerate(kids):
            await walk(kid, prefix + ("    " if last else "│   "), i == len(kids) - 1, depth + 1)

    kids = await flows.children(queue, job_id)
    for i, kid in enumerate(kids):
        await walk(kid, "", i == len(kids) - 1, 1)
    return lines


@click.command()
@click.argument("queue")
@click.argument("job_id")
@click.option("--url", default=None, help="server URL (default: ECHOMQ_URL)")
def flow(queue: str, job_id: str, url: str | None) -> None:
    """Print the flow of JOB_ID of QUEUE as a tree: each node's state, and the outcome its
    parent recorded ([done], [dead], [cancelled]; none while it has not been relayed)."""
    async def go(connector: Any) -> list[str] | None:
        await _checked(connector, queue)  # QueueNotFound: one line
        return await tree_lines(AsyncFlows(connector), queue, job_id)

    lines = _run_on(url, go)
    if lines is None:
        click.echo(f"{job_id}: no such job in {queue} (never admitted, or not kept)", err=True)
        sys.exit(4)
    click.echo("\n".join(lines))
