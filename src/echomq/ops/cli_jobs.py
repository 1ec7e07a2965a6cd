"""``echomq result|progress|cancel``: one job's end, its progress, and cancelling jobs.

    echomq result QUEUE ID [--timeout S]   wait for the job to end; print its result
                                           (exit 1: dead, with its error; 2: cancelled;
                                           3: not ended in time; 4: no such job;
                                           5: expired, never started by its deadline)
    echomq progress QUEUE ID               the job's state and last progress report
    echomq cancel QUEUE ID...              cancel waiting jobs, ask running ones to stop

Registered on the ``echomq`` group by :mod:`echomq.ops.cli`. Every expected failure is one
line and a non-zero exit (docs/decisions/0023).
"""

from __future__ import annotations

import sys
from typing import Any

import click

from echomq.core.errors import JobCancelled, JobExpired, JobFailed, JobNotFound, ResultTimeout
from echomq.core.model import CancelOutcome
from echomq.ops.cli import _checked, _run_on, console

__all__ = ["cancel", "progress", "result"]

URL = click.option("--url", default=None, help="server URL (default: ECHOMQ_URL)")


def _show(data: bytes) -> str:
    """Bytes as text when they are UTF-8, else their repr (a result may be any bytes)."""
    try:
        return data.decode()
    except UnicodeDecodeError:
        return repr(data)


@click.command()
@click.argument("queue")
@click.argument("job_id")
@click.option("--timeout", default=30.0, show_default=True, type=click.FloatRange(0, 86_400),
              help="seconds to wait for the job to end (0: look once)")
@URL
def result(queue: str, job_id: str, timeout: float, url: str | None) -> None:
    """Wait until JOB_ID of QUEUE ends and print its result (a dead job's error)."""
    async def go(connector: Any) -> bytes:
        return await (await _checked(connector, queue)).result(job_id, timeout=timeout)

    try:
        click.echo(_show(_run_on(url, go)))
    except JobFailed as exc:
        click.echo(f"dead: {exc.error or 'no error kept'}", err=True)
        sys.exit(1)
    except JobCancelled:
        click.echo(f"{job_id}: cancelled", err=True)
        sys.exit(2)
    except JobExpired:
        click.echo(f"{job_id}: expired (not started by its deadline)", err=True)
        sys.exit(5)
    except ResultTimeout as exc:
        click.echo(f"{job_id}: not ended within {timeout:g} s (it is {exc.state})", err=True)
        sys.exit(3)
    except JobNotFound:
        click.echo(f"{job_id}: no such job in {queue} (never admitted, or not kept)", err=True)
        sys.exit(4)


@click.command()
@click.argument("queue")
@click.argument("job_id")
@URL
def progress(queue: str, job_id: str, url: str | None) -> None:
    """The state and the last progress report of JOB_ID of QUEUE."""
    async def go(connector: Any) -> dict[str, bytes] | None:
        return await (await _checked(connector, queue)).job(job_id)

    row = _run_on(url, go)
    if row is None:
        click.echo(f"{job_id}: no such job in {queue} (never admitted, or not kept)", err=True)
        sys.exit(4)
    report = row.get("progress")
    console.print(f"{job_id}: {row.get('state', b'?').decode()}, "
                  + ("no progress reported" if report is None else f"progress {_show(report)}"))


@click.command()
@click.argument("queue")
@click.argument("job_ids", nargs=-1, required=True)
@URL
def cancel(queue: str, job_ids: tuple[str, ...], url: str | None) -> None:
    """Cancel JOB_IDS of QUEUE: waiting ones now, running ones asked to stop."""
    async def go(connector: Any) -> list[CancelOutcome]:
        return await (await _checked(connector, queue)).cancel(list(job_ids))

    words = {CancelOutcome.CANCELLED: "cancelled", CancelOutcome.ASKED: "asked to stop",
             CancelOutcome.LEFT: "left as it is (ended, or unknown)"}
    for job_id, outcome in zip(job_ids, _run_on(url, go), strict=True):
        console.print(f"{job_id}: {words[outcome]}")

