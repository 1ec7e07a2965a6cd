"""Partitions of a real 3+3 cluster, inside a network namespace of their own.

    unshare -n python -m tests.reliability.partition_child WORKDIR

Run by tests/reliability/test_partition.py; prints one JSON object with the figures.
Inside the new namespace each node binds its own loopback address (127.0.0.11-16) and
sends from it (``bind-source-addr``), so ``iptables`` rules on one address cut one
node from every other. The producers and the zombie consumer on the cut-off side reach
their primary through its unix socket, which no rule touches: they are on its side.

Scenarios, in order, on one cluster:

1. *short*: the queue's primary is cut off for 1 s (half the 2 s node timeout) while a
   plain and a durable producer admit one job at a time;
2. *long*: the primary of the queues' slots is cut off for 9 s. Meanwhile a zombie
   consumer on its side claims and pays a job, and once the majority has promoted the
   replica a consumer there claims and pays the same job. Afterwards: which
   acknowledged admissions survived, and how many times was the job paid.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from codemojex.infra.pg import PgServer, open_pool
from codemojex.wallet import audit, ensure_player, grant, migrate
from codemojex.wallet.results import AlreadyApplied, Granted
from echomq import (
    AsyncClusterConnector,
    AsyncConnector,
    AsyncQueue,
    NotDurable,
    QueueOptions,
    Verdict,
    generate,
)
from echomq.servers.local_cluster import _NODE_CONFIG, ClusterNode, LocalCluster
from echomq.servers.server import EmbeddedValkey

NODE_TIMEOUT_MS = 2000


class NetCluster(LocalCluster):
    """A LocalCluster whose nodes each own a loopback address and a unix socket."""

    def start(self, timeout: float = 60.0) -> LocalCluster:
        total = self.primaries * (1 + self.replicas_per_primary)
        for i in range(total):
            ip = f"127.0.0.{11 + i}"
            server = EmbeddedValkey(
                port=7000 + i, data_dir=self.base_dir / f"node-{i}", cluster=True,
                cluster_node_timeout_ms=self.node_timeout_ms,
                extra={**_NODE_CONFIG, "cluster-announce-ip": ip, "bind-source-addr": ip,
                       "unixsocket": str(self.base_dir / f"node-{i}.sock"), "unixsocketperm": "700"})
            server.host = ip
            node = ClusterNode(server)
            self._start_process(node)
            self.nodes.append(node)
        self._create(timeout)
        return self


def sock(cluster: LocalCluster, node: ClusterNode) -> str:
    return f"unix://{cluster.base_dir / f'node-{cluster.nodes.index(node)}.sock'}"


def iptables(action: str, ip: str) -> None:
    for rule in (["-s", ip], ["-d", ip]):
        subprocess.run(["iptables", action, "OUTPUT", *rule, "-j", "DROP"], check=True)


class Producer:
    """Admits one job at a time to ``queue`` on one node (through its unix socket)."""

    def __init__(self, url: str, queue: str, durable: bool) -> None:
        self.conn = AsyncConnector.from_url(url, retry_budget_s=0.2, socket_timeout=1.0)
        opts = QueueOptions(durable_replicas=1, durable_timeout_ms=300) if durable else QueueOptions()
        self.queue = AsyncQueue(self.conn, queue, options=opts)
        self.acked: list[tuple[str, float]] = []
        self.refused: list[tuple[float, str]] = []
        self.stop = asyncio.Event()

    async def run(self) -> None:
        while not self.stop.is_set():
            jid = generate("JOB")
            try:
                if await self.queue.enqueue(jid, b"x") is Verdict.ENQUEUED:
                    self.acked.append((jid, time.monotonic()))
            except NotDurable:
                self.refused.append((time.monotonic(), "NotDurable"))
            except Exception as exc:
                self.refused.append((time.monotonic(), f"{type(exc).__name__}: {str(exc)[:60]}"))
                await asyncio.sleep(0.005)

    def first_refusal_after(self, t: float) -> tuple[float | None, str]:
        for at, what in self.refused:
            if at >= t:
                return at - t, what
        return None, ""

    def acked_between(self, a: float, b: float) -> int:
        return sum(1 for _, at in self.acked if a <= at < b)


async def until(check: Any, limit_s: float) -> None:
    """Poll the blocking ``check`` (in a thread) until true, at most ``limit_s`` seconds."""
    deadline = time.monotonic() + limit_s
    while not await asyncio.to_thread(check):
        if time.monotonic() > deadline:
            raise TimeoutError(f"not reached in {limit_s}s")
        await asyncio.sleep(0.05)


def queue_on(cluster: LocalCluster, node: ClusterNode, prefix: str) -> str:
    for i in range(10_000):
        name = f"{prefix}{i}"
        if cluster.primary_for_key(f"emq:{{{name}}}:pending") is node:
            return name
    raise RuntimeError("no queue name on that node")


async def survivors(conn: AsyncClusterConnector, queue: str, ids: list[str]) -> int:
    q = AsyncQueue(conn, queue)
    return sum([await q.job(j) is not None for j in ids])


async def partition(cluster: LocalCluster, name: str, cut_s: float, majority_url: str,
                    zombie: Any = None) -> dict[str, Any]:
    primary = cluster.primary_for_key("emq:{p0}:pending")
    replica = cluster.replica_of(primary)
    plain = Producer(sock(cluster, primary), queue_on(cluster, primary, f"{name}a"), durable=False)
    durable = Producer(sock(cluster, primary), queue_on(cluster, primary, f"{name}d"), durable=True)
    tasks = [asyncio.create_task(p.run()) for p in (plain, durable)]
    await asyncio.sleep(1.0)
    cut = time.monotonic()
    iptables("-A", primary.host)
    promoted = None
    zombie_task = asyncio.create_task(zombie(primary, replica)) if zombie else None
    while time.monotonic() - cut < cut_s:
        if promoted is None and await asyncio.to_thread(lambda: replica.role == "primary"):
            promoted = time.monotonic() - cut
        await asyncio.sleep(0.05)
    iptables("-D", primary.host)
    healed = time.monotonic()
    for p in (plain, durable):
        p.stop.set()
    await asyncio.gather(*tasks)
    zombie_result = await zombie_task if zombie_task else None
    await asyncio.to_thread(cluster.wait_healthy, 60.0)
    conn = AsyncClusterConnector.from_url(majority_url, retry_budget_s=30)
    try:
        out: dict[str, Any] = {"cut_s": cut_s, "replica_promoted_after_s": promoted,
                               "old_primary_role_after": primary.role}
        for label, p in (("plain", plain), ("durable", durable)):
            ids = [j for j, _ in p.acked]
            kept = await survivors(conn, p.queue.name, ids)
            first, what = p.first_refusal_after(cut)
            out[label] = {"acked": len(ids), "acked_during_cut": p.acked_between(cut, healed),
                          "lost": len(ids) - kept, "refused_after_s": first, "first_refusal": what,
                          "refusals": len(p.refused)}
        out["zombie"] = zombie_result
        return out
    finally:
        await conn.aclose()
        await plain.conn.aclose()
        await durable.conn.aclose()


async def main(work: Path) -> dict[str, Any]:
    cluster = NetCluster(primaries=3, replicas_per_primary=1, node_timeout_ms=NODE_TIMEOUT_MS,
                         base_dir=work / "cluster")
    pg = PgServer()  # its own temporary directory (the embedded server widens its path)
    await asyncio.to_thread(cluster.start)
    pg_url = await asyncio.to_thread(pg.start)
    pool = await open_pool(pg_url, min_size=1, max_size=4)
    try:
        await migrate(pool)
        await ensure_player(pool, "winner")
        result: dict[str, Any] = {}
        majority = lambda exclude: "redis+cluster://" + ",".join(  # noqa: E731
            f"{n.host}:{n.port}" for n in cluster.nodes if n is not exclude)
        short_primary = cluster.primary_for_key("emq:{p0}:pending")
        result["short"] = await partition(cluster, "s", 1.0, majority(short_primary))

        async def zombie(primary: ClusterNode, replica: ClusterNode) -> dict[str, Any]:
            """A consumer on the cut-off side, and one on the majority side, pay one job."""
            return await pay_twice(cluster, primary, replica, pool, majority(primary))

        await prepare(cluster)
        long_primary = cluster.primary_for_key("emq:{p0}:pending")
        result["long"] = await partition(cluster, "l", 9.0, majority(long_primary), zombie)
        result["audit_ok"] = (await audit(pool)).ok
        return result
    finally:
        await pool.close()
        pg.stop()
        cluster.stop()


async def pay_twice(cluster: LocalCluster, primary: ClusterNode, replica: ClusterNode, pool: Any,
                    majority_url: str) -> dict[str, Any]:
    """The job was admitted (and replicated) before the cut: see ``prepare``."""
    name = queue_on(cluster, primary, "z")
    job = PAY_JOBS[name]
    zconn = AsyncConnector.from_url(sock(cluster, primary), retry_budget_s=0.5)
    zq = AsyncQueue(zconn, name)
    out: dict[str, Any] = {"job": job}
    try:
        (lease,) = await zq.claim(1, lease_ms=60_000)
        paid = await grant(pool, "winner", 100, f"pay:{job}")
        out["zombie"] = {"attempt": lease.attempt, "paid": isinstance(paid, Granted)}
        try:
            out["zombie"]["complete"] = (await zq.complete(lease)).value
        except Exception as exc:
            out["zombie"]["complete"] = type(exc).__name__
    finally:
        await zconn.aclose()
    await until(lambda: replica.role == "primary", 30)
    mconn = AsyncClusterConnector.from_url(majority_url, retry_budget_s=30)
    try:
        mq = AsyncQueue(mconn, name)
        leases: list[Any] = []
        deadline = time.monotonic() + 30
        while not leases and time.monotonic() < deadline:
            leases = await mq.claim(1, lease_ms=60_000)
        assert leases, "the majority never saw the job"
        paid = await grant(pool, "winner", 100, f"pay:{job}")
        done = await mq.complete(leases[0])
        out["majority"] = {"attempt": leases[0].attempt, "paid": isinstance(paid, Granted),
                           "already_paid": isinstance(paid, AlreadyApplied), "complete": done.value}
    finally:
        await mconn.aclose()
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT count(*) FROM movements WHERE ref = %s", (f"pay:{job}",))
        row = await cur.fetchone()
        out["payments_in_postgres"] = int(row[0]) if row else -1
        cur = await conn.execute("SELECT balance FROM players WHERE id = 'winner'")
        row = await cur.fetchone()
        out["balance"] = int(row[0]) if row else -1
    return out


PAY_JOBS: dict[str, str] = {}


async def prepare(cluster: LocalCluster) -> None:
    """Admit the payment job on the queue of the long partition's primary, replicated."""
    primary = cluster.primary_for_key("emq:{p0}:pending")
    name = queue_on(cluster, primary, "z")
    conn = AsyncConnector.from_url(sock(cluster, primary))
    try:
        q = AsyncQueue(conn, name, options=QueueOptions(durable_replicas=1, durable_timeout_ms=2000))
        job = generate("JOB")
        assert await q.enqueue(job, b"pay 100") is Verdict.ENQUEUED
        PAY_JOBS[name] = job
    finally:
        await conn.aclose()


if __name__ == "__main__":
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)  # the new namespace's loopback
    print(json.dumps(asyncio.run(main(Path(sys.argv[1]))), default=str))
