"""``echomq relay``: move committed outbox rows from PostgreSQL onto their queues.

    echomq relay --database-url URL [--url URL] [--table T] [--batch N] [--poll S]
                 [--install] [--drain]

Runs until SIGTERM or Ctrl-C (exit 130; an open batch rolls back and its rows wait for the
next relay), or with ``--drain`` until the outbox is empty, printing one summary line.
Several relays share one outbox. The environment variable ``ECHOMQ_RELAY_CRASH_AT`` (one of
:data:`echomq.outbox.CRASH_POINTS`) makes the relay kill itself (SIGKILL) at that step: for
fault tests only. Registered on the ``echomq`` group by :mod:`echomq.ops.cli`.
"""

from __future__ import annotations

import os
from typing import Any

import click

from echomq.ops.cli import _url

__all__ = ["relay"]

ENV_DATABASE_URL = "ECHOMQ_DATABASE_URL"
ENV_CRASH_AT = "ECHOMQ_RELAY_CRASH_AT"


@click.command()
@click.option("--database-url", default=None,
              help=f"PostgreSQL URL of the outbox (default: {ENV_DATABASE_URL})")
@click.option("--url", default=None, help="Valkey server URL (default: ECHOMQ_URL)")
@click.option("--table", default="echomq_outbox", show_default=True, help="the outbox table")
@click.option("--batch", default=500, show_default=True, type=click.IntRange(1, 10_000),
              help="rows per transaction")
@click.option("--poll", default=1.0, show_default=True, type=click.FloatRange(0.01, 3600),
              help="seconds between looks when no notification comes")
@click.option("--install", is_flag=True, help="create the outbox table first (idempotent)")
@click.option("--drain", is_flag=True, help="empty the outbox once, print a summary, exit")
def relay(database_url: str | None, url: str | None, table: str, batch: int, poll: float,
          install: bool, drain: bool) -> None:
    """Admit the committed rows of an outbox table onto their queues, each once."""
    import asyncio
    import logging

    from echomq.client._async.connect import connect_async
    from echomq.outbox import CRASH_POINTS, Outbox, OutboxRelay

    database_url = database_url or os.environ.get(ENV_DATABASE_URL) or None
    if not database_url:
        raise click.UsageError(f"give --database-url or set {ENV_DATABASE_URL}")
    crash_at = os.environ.get(ENV_CRASH_AT) or None
    if crash_at is not None and crash_at not in CRASH_POINTS:
        raise click.UsageError(f"{ENV_CRASH_AT} must be one of {', '.join(CRASH_POINTS)}")
    Outbox(table)  # a bad table name: one line, before any connection
    server = _url(url)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")

    async def go() -> Any:
        import psycopg

        if install:
            try:
                async with await psycopg.AsyncConnection.connect(database_url, connect_timeout=5) as conn:
                    await Outbox(table).install_async(conn)
            except psycopg.Error as exc:
                raise click.ClickException(f"PostgreSQL: {str(exc).strip().splitlines()[0]}") from None
        connector = connect_async(server)
        try:
            async with OutboxRelay(database_url, connector, table=table, batch=batch, poll_s=poll,
                                   crash_at=crash_at) as r:
                if drain:
                    return await r.drain()
                click.echo(f"relay: {table} -> {server} (batch {batch}, poll {poll:g} s)", err=True)
                await r.run()
                return None
        finally:
            await connector.aclose()

    report = asyncio.run(go())
    if report is not None:
        click.echo(f"relay: claimed={report.claimed} admitted={report.admitted} "
                   f"duplicates={report.duplicates} waiting={report.waiting} refused={report.refused}")
