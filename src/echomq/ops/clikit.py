"""Command-line hygiene shared by ``echomq`` and ``codemojex``.

An expected failure (an unreachable server, a wrong password, a malformed URL, a bad
queue name or number, a queue that does not exist, a database that refuses) prints one
line, ``<prog>: error: <what went wrong>``, and exits non-zero; it never prints a
traceback. Anything else is a bug and keeps its traceback. Ctrl-C exits 130 with one
line. :class:`Group` does this for every subcommand of a ``click`` group.

Ctrl-C (or SIGTERM) exits 130 within about a second, every time, and leaves nothing
behind: embedded servers run in process groups of their own, so the terminal's Ctrl-C
reaches only this process; its handler prints one line, silences the rest of the
output, stops every embedded server this process started (Valkey with SIGTERM, which
flushes its AOF; PostgreSQL with an immediate shutdown, recovered from its WAL on the
next start) through :func:`echomq.servers.server.emergency_stop`, removes the command's
private temporary folder and exits. Commands that shut down gracefully on a signal
(``echomq worker``, ``echomq server``, the bot) install their own handlers.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from echomq.core.errors import EchoMQError

__all__ = ["EXIT_BOUND_S", "EXPECTED", "Group", "describe", "short_connector"]

EXPECTED: tuple[type[BaseException], ...] = (EchoMQError, OSError, ValueError)
"""Failures that are about the world or the input, not a bug: reported in one line (with
every exception type of redis-py: :attr:`Group.expected_modules`)."""

EXIT_BOUND_S = 2.0
"""Ctrl-C ends a command within this bound (the tests hold it to it)."""

CLI_RETRY_BUDGET_S = 2.0
"""A command gives an unreachable server this long, not the library's 10 s."""


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    while exc is not None and exc not in out:
        out.append(exc)
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return out


def _redis_types(*names: str) -> tuple[type[BaseException], ...]:
    """redis-py's exception types of these names, or none if redis-py was never imported
    (then no exception can be one of them: a command that failed before connecting does
    not pay for importing it)."""
    rex = sys.modules.get("redis.exceptions")
    return tuple(getattr(rex, n) for n in names) if rex is not None else ()


def describe(exc: BaseException) -> str:
    """One line for an expected failure: what went wrong, in the user's terms."""
    chain = _chain(exc)
    text = " ".join(str(e) for e in chain)
    if any(isinstance(e, _redis_types("AuthenticationError")) for e in chain) or any(
            w in text for w in ("WRONGPASS", "NOAUTH", "invalid username-password", "invalid password")):
        return "authentication failed: wrong or missing user name or password in the URL"
    unreachable: tuple[type[BaseException], ...] = (TimeoutError, *_redis_types("ConnectionError",
                                                                                "TimeoutError"))
    for e in reversed(chain):  # the root cause says most: "Connection refused", a DNS failure
        if isinstance(e, unreachable) or (
                isinstance(e, OSError) and e.errno is not None):
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            return f"cannot reach the server: {first}"
    message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return message


def short_connector(url: str) -> Any:
    """A connector for a command: no I/O yet, a short retry budget, short timeouts."""
    from echomq.client._async.connect import connect_async

    try:
        return connect_async(url, retry_budget_s=CLI_RETRY_BUDGET_S, socket_timeout=CLI_RETRY_BUDGET_S)
    except (ValueError, TypeError, IndexError) as exc:
        raise click.UsageError(f"bad server URL {url!r}: {exc}") from None


class _RunRoot:
    """A private temporary directory for one command: every temporary folder the command
    makes (embedded servers' data) lives under it, so removing it at exit leaves nothing
    behind wherever an interrupt landed."""

    def __init__(self, prog: str) -> None:
        self.path: str | None = None
        self.interrupted = False  # then the interrupt's thread removes it, not the main thread
        self._previous = tempfile.tempdir
        self.path = tempfile.mkdtemp(prefix=f"{prog}-run-")
        tempfile.tempdir = self.path

    def remove(self) -> None:
        path, self.path = self.path, None
        tempfile.tempdir = self._previous
        if path is None:
            return
        # A server whose start was cut short before it was tracked: a postmaster (its pid
        # file) or a child of ours working in this folder. Both were started by this process.
        for pid in _postmasters(path):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGQUIT)
        _wait_gone(_postmasters(path), 0.5)
        me = str(os.getpid())
        for proc in Path("/proc").iterdir():
            with contextlib.suppress(OSError, IndexError):
                if (proc.name.isdigit() and (proc / "stat").read_text().rsplit(")", 1)[1].split()[1] == me
                        and os.readlink(proc / "cwd").startswith(path)):
                    os.kill(int(proc.name), signal.SIGKILL)
        # A server still ending may write a last file while the tree is removed (seen: the
        # folder left behind after an interrupt during start-up): remove again, briefly.
        deadline = time.monotonic() + 0.4
        shutil.rmtree(path, ignore_errors=True)
        while os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.02)
            shutil.rmtree(path, ignore_errors=True)


def _postmasters(path: str) -> list[int]:
    pids = []
    for pidfile in Path(path).glob("*/**/postmaster.pid"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            pids.append(int(pidfile.read_text().split()[0]))
    return pids


def _wait_gone(pids: list[int], within: float) -> None:
    deadline = time.monotonic() + within
    for pid in pids:
        with contextlib.suppress(OSError):
            while time.monotonic() < deadline:
                os.kill(pid, 0)  # raises once it is gone
                time.sleep(0.01)


def _interrupted(prog: str, root: _RunRoot) -> None:
    os.write(2, f"\n{prog}: interrupted\n".encode())
    saved = os.dup(2)
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)  # whatever the interrupted command still says is noise now
        os.dup2(devnull, 2)
        logging.disable(logging.CRITICAL)
        from echomq.servers.server import emergency_stop

        emergency_stop()
        root.remove()
    except BaseException as exc:  # still exit: say what was not cleaned up
        os.write(saved, f"{prog}: cleanup after the interrupt failed: {exc!r}\n".encode())
    finally:
        os._exit(130)


def _on_signal(prog: str, root: _RunRoot) -> Any:
    fired = threading.Event()

    def handler(signum: int, frame: Any) -> None:
        if not fired.is_set():
            fired.set()
            root.interrupted = True
            threading.Thread(target=_interrupted, args=(prog, root), name="interrupted", daemon=True).start()

    return handler


class Group(click.Group):
    """A ``click`` group whose expected failures are one line and a non-zero exit.

    ``lazy`` maps a subcommand's name to ``"module:attribute"``: imported only when run
    (a heavy import such as a Telegram client must not slow every other command).
    """

    expected: tuple[type[BaseException], ...] = EXPECTED
    expected_modules: tuple[str, ...] = ("redis.",)  # exception types from these are expected too
    lazy: dict[str, str] = {}  # noqa: RUF012 (set per subclass)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy and cmd_name not in self.commands:
            module, _, attr = self.lazy[cmd_name].partition(":")
            command = getattr(importlib.import_module(module), attr)
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def is_expected(self, exc: BaseException) -> bool:
        return isinstance(exc, self.expected) or type(exc).__module__.startswith(self.expected_modules)

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True, **extra: Any) -> Any:
        prog = prog_name or self.name or "command"
        root = _RunRoot(prog)
        previous = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                previous[sig] = signal.signal(sig, _on_signal(prog, root))
        try:
            return self._main(prog, args, prog_name, complete_var, standalone_mode, **extra)
        finally:
            if root.interrupted:
                # The interrupt's thread is stopping the servers and ends the process (exit
                # 130); this thread must not end it first (a start the cleanup refused
                # fails here at once), or the cleanup would be cut short.
                time.sleep(10 * EXIT_BOUND_S)
                os._exit(130)
            root.remove()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _main(self, prog: str, args: Sequence[str] | None, prog_name: str | None,
              complete_var: str | None, standalone_mode: bool, **extra: Any) -> Any:
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
        except Exception as exc:
            if not self.is_expected(exc):
                raise
            click.echo(f"{prog}: error: {describe(exc)}", err=True)
            sys.exit(1)
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)
