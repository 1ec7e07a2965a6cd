"""``echomq info`` on one screen: the queues table, then the workers table (rich)."""

from __future__ import annotations

import time

from rich import box
from rich.console import Console
from rich.table import Table

from echomq.client.info import ServerInfo

__all__ = ["age", "render_info"]


def age(seconds: float | None) -> str:
    """``3.2s``, ``4m05s``, ``2h03m``, ``3d04h``; ``-`` for None."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    m, s = divmod(int(seconds), 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    if h < 48:
        return f"{h}h{m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d{h:02d}h"


def _mib(n: int | None) -> str:
    return "-" if n is None else f"{n / 1048576:.1f} MiB"


def render_info(info: ServerInfo, console: Console) -> None:
    policy = f" ({info.policy})" if info.policy and info.maxmemory else ""
    console.print(f"[bold]server[/] valkey {info.version}, memory {_mib(info.used_memory)}"
                  f"{' of ' + _mib(info.maxmemory) + policy if info.maxmemory else ''}, "
                  f"{len(info.queues)} queue(s), {info.workers} worker(s) alive")
    if info.refusing:
        console.print("[bold red]at maxmemory: admissions are refused (producers get ServerFull) "
                      "while workers drain; they resume as memory frees[/]")
    table = Table(title="queues (/m: in the last minute; oldest: pending since admission)",
                  box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("queue", "pend", "act", "delay", "done", "dead", "exp", "done/m", "dead/m",
                "oldest", "late", "wrk"):
        table.add_column(col, justify="left" if col == "queue" else "right", min_width=len(col))
    for q in info.queues:
        c = q.counts
        table.add_row(q.name, str(c.pending), str(c.active), str(c.delayed), str(c.done), str(c.dead),
                      str(c.expired), str(q.completed_last_minute), str(q.dead_last_minute),
                      age(q.oldest_pending_age_s), str(q.overdue_leases), str(len(q.workers)))
    console.print(table)
    failed = sum(q.failed_last_minute for q in info.queues)
    if failed:
        console.print(f"handler failures in the last minute (by live workers): {failed}")
    workers = [w for q in info.queues for w in q.workers]
    if not workers:
        console.print("no workers alive")
        return
    wt = Table(title="workers", box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("worker", "queue", "slots", "running", "done/m", "fail/m", "up"):
        wt.add_column(col, justify="left" if col in ("worker", "queue") else "right", min_width=len(col))
    for w in workers:
        started = w.about.get("started")
        up = age(time.time() - float(started)) if isinstance(started, int | float) else "-"
        wt.add_row(w.name, w.queue, str(w.about.get("concurrency", "-")), str(w.about.get("running", "-")),
                   str(w.processed_last_minute), str(w.failed_last_minute), up)
    console.print(wt)
