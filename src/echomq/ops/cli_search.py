"""``echomq search QUEUE``: find jobs by state, lane, error, admission time and id prefix.

    echomq search QUEUE [--state S]... [--lane L] [--error-type T] [--text X]
                        [--since T] [--until T] [--id-prefix P] [--limit N] [--budget N]
                        [--cursor C] [--json]

Prints the hits (id, state, attempts, lane, the error's first line), then the cursor to go
on from (``--cursor``), or ``end`` when the walk is complete. Each window the search takes
is read-only script calls of bounded work: one examining at most ``--budget`` jobs,
then one per 32 candidates (docs/decisions/0037).
Times are Unix milliseconds or ISO 8601 (``2026-12-03T15:00:00Z``; no zone: UTC).
Registered on the ``echomq`` group by :mod:`echomq.ops.cli`.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import click

from echomq.ops.cli import _checked, _run_on, console
from echomq.protocol import keyspace

__all__ = ["search"]

STATES = ("pending", "active", "delayed", "done", "dead", "expired")


def _time_ms(value: str | None, name: str) -> int | None:
    if value is None:
        return None
    if value.isdigit():
        return int(value)
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise click.BadParameter(f"{value!r} is neither Unix milliseconds nor an ISO 8601 time",
                                 param_hint=name) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


@click.command()
@click.argument("queue")
@click.option("--state", "states", multiple=True, type=click.Choice(STATES),
              help="a state to search (repeat; default: all, in this order)")
@click.option("--lane", default=None, help="the job's lane")
@click.option("--error-type", default="", help="the type its last error names (ValueError)")
@click.option("--text", default="", help="a text its last error's first line holds")
@click.option("--since", default=None, help="admitted at or after (ms or ISO 8601)")
@click.option("--until", default=None, help="admitted at or before (ms or ISO 8601)")
@click.option("--id-prefix", default="", help="the start of the job's id")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 10_000))
@click.option("--budget", default=200, show_default=True, type=click.IntRange(1, 500),
              help="jobs one window examines (each of its server calls bounded)")
@click.option("--windows", default=200, show_default=True, type=click.IntRange(1, 100_000),
              help="windows at most before printing the cursor")
@click.option("--cursor", default=None, help="go on from a cursor a previous search printed")
@click.option("--json", "as_json", is_flag=True, help="one JSON object: hits and cursor")
@click.option("--url", default=None, help="server URL (default: ECHOMQ_URL)")
def search(queue: str, states: tuple[str, ...], lane: str | None, error_type: str, text: str,
           since: str | None, until: str | None, id_prefix: str, limit: int, budget: int,
           windows: int, cursor: str | None, as_json: bool, url: str | None) -> None:
    """Find QUEUE's jobs by state, lane, error, admission time and id prefix."""
    from echomq.protocol.search import SearchQuery

    queue = keyspace.check_queue(queue)
    query = SearchQuery(states=states or STATES, lane=lane, error_type=error_type, text=text,
                        since_ms=_time_ms(since, "--since"), until_ms=_time_ms(until, "--until"),
                        id_prefix=id_prefix)

    async def go(connector: Any) -> Any:
        q = await _checked(connector, queue)
        if not hasattr(q, "search"):
            raise click.ClickException(f"{queue} is a sharded queue: search its shards by name")
        return await q.search(query, cursor=cursor, limit=limit, budget=budget, max_windows=windows)

    page = _run_on(url, go)
    if as_json:
        click.echo(json.dumps({"hits": [{"id": h.id, "state": h.state, "score": h.score,
                                          "attempts": h.attempts, "lane": h.lane, "error": h.error}
                                         for h in page.hits],
                               "cursor": page.cursor, "examined": page.examined}))
        return
    from rich.table import Table

    table = Table(title=f"{queue}: {len(page.hits)} found ({page.examined} examined)")
    for col in ("id", "state", "attempts", "lane", "error"):
        table.add_column(col)
    for h in page.hits:
        table.add_row(h.id, h.state, str(h.attempts), h.lane or "", h.error)
    console.print(table)
    click.echo(f"cursor: {page.cursor}" if page.cursor else "end")
