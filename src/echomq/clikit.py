"""Command-line hygiene shared by ``echomq`` and ``codemojex``.

An expected failure (an unreachable server, a wrong password, a malformed URL, a bad
queue name or number, a queue that does not exist, a database that refuses) prints one
line, ``<prog>: error: <what went wrong>``, and exits non-zero; it never prints a
traceback. Anything else is a bug and keeps its traceback. Ctrl-C exits 130 with one
line. :class:`Group` does this for every subcommand of a ``click`` group.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import click
from redis import exceptions as rex

from echomq.errors import EchoMQError

__all__ = ["EXPECTED", "Group", "describe", "short_connector"]

EXPECTED: tuple[type[BaseException], ...] = (EchoMQError, rex.RedisError, OSError, ValueError)
"""Failures that are about the world or the input, not a bug: reported in one line."""

CLI_RETRY_BUDGET_S = 2.0
"""A command gives an unreachable server this long, not the library's 10 s."""


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    while exc is not None and exc not in out:
        out.append(exc)
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return out


def describe(exc: BaseException) -> str:
    """One line for an expected failure: what went wrong, in the user's terms."""
    chain = _chain(exc)
    text = " ".join(str(e) for e in chain)
    if any(isinstance(e, rex.AuthenticationError) for e in chain) or any(
            w in text for w in ("WRONGPASS", "NOAUTH", "invalid username-password", "invalid password")):
        return "authentication failed: wrong or missing user name or password in the URL"
    for e in reversed(chain):  # the root cause says most: "Connection refused", a DNS failure
        if isinstance(e, rex.ConnectionError | TimeoutError | rex.TimeoutError) or (
                isinstance(e, OSError) and e.errno is not None):
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            return f"cannot reach the server: {first}"
    message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return message


def short_connector(url: str) -> Any:
    """A connector for a command: no I/O yet, a short retry budget, short timeouts."""
    from echomq._async.cluster import connect_async

    try:
        return connect_async(url, retry_budget_s=CLI_RETRY_BUDGET_S, socket_timeout=CLI_RETRY_BUDGET_S)
    except (ValueError, TypeError, IndexError) as exc:
        raise click.UsageError(f"bad server URL {url!r}: {exc}") from None


class Group(click.Group):
    """A ``click`` group whose expected failures are one line and a non-zero exit."""

    expected: tuple[type[BaseException], ...] = EXPECTED

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True, **extra: Any) -> Any:
        prog = prog_name or self.name or "command"
        try:
            rv = super().main(args=args, prog_name=prog_name, complete_var=complete_var,
                              standalone_mode=False, **extra)
        except click.exceptions.Abort:
            click.echo(f"{prog}: interrupted", err=True)
            sys.exit(130)
        except KeyboardInterrupt:
            click.echo(f"{prog}: interrupted", err=True)
            sys.exit(130)
        except click.ClickException as exc:
            click.echo(f"{prog}: error: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)
        except self.expected as exc:
            click.echo(f"{prog}: error: {describe(exc)}", err=True)
            sys.exit(1)
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)
