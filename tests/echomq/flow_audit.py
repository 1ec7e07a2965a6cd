"""Shared by the flow fault tests and bench/flow_scale.py: admit random flows, wait for
them to end, and audit the server's own counts (decision 0038).

The audit: every parent either released exactly once (its row's ``released``, counted by
the release script itself, is 1 and ``settled`` equals its child count) or failed by its
``fail`` policy and never released; no parent ran before all its children ended (the
handler of tests/echomq/flow_worker_proc.py logs ``early <id>`` to ``testlog:{A}``
otherwise); no notice is left unrelayed and no parent waits.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from typing import Any

from echomq import AsyncQueue, generate

Flows = dict[str, tuple[str, str, list[tuple[str, str, bytes]]]]  # pid -> (home, policy, kids)


async def admit_random(conn: Any, rng: random.Random, n: int, queues: list[str], *,
                       max_children: int = 50, fail_rate: float = 0.03) -> Flows:
    """``n`` flows, each parent in one of ``queues`` with 1..max_children children spread
    over them (a child with payload ``F`` fails every attempt), random policies."""
    parents: Flows = {}
    for _ in range(n):
        home = rng.choice(queues)
        pid = generate("JOB")
        kids = [(rng.choice(queues), generate("JOB"), b"F" if rng.random() < fail_rate else b"c")
                for _ in range(rng.randint(1, max_children))]
        policy = rng.choice(("fail", "continue", "ignore"))
        assert await AsyncQueue(conn, home).admit_flow(parent=(pid, b"P"), children=kids,
                                                       on_child_failure=policy)
        parents[pid] = (home, policy, kids)
    return parents


async def states(conn: Any, parents: Flows) -> Counter[str]:
    out: Counter[str] = Counter()
    for pid, (home, _, _) in parents.items():
        row = await AsyncQueue(conn, home).job(pid)
        out[row["state"].decode() if row else "gone"] += 1
    return out


def ended(counts: Counter[str]) -> bool:
    return set(counts) <= {"done", "dead"}


@dataclass(frozen=True)
class Audit:
    flows: int
    children: int
    released: int
    failed: int
    doubles: int
    early: int

    def line(self) -> str:
        return (f"flows {self.flows}, children {self.children}, released exactly once "
                f"{self.released}, failed by policy {self.failed}, doubles {self.doubles}, "
                f"early {self.early}")


async def audit(conn: Any, parents: Flows, queues: list[str], log_queue: str) -> Audit:
    """Check every parent (see the module); raises AssertionError naming the first breach."""
    log = await conn.command("LRANGE", f"testlog:{{{log_queue}}}", 0, -1)
    early = [x for x in log if x.startswith(b"early")]
    released = failed = doubles = 0
    for pid, (home, policy, kids) in parents.items():
        row = await AsyncQueue(conn, home).job(pid)
        assert row is not None, pid
        n = int(row.get("released", b"0"))
        doubles += n > 1
        if row["state"] == b"dead" and n == 0:  # failed by its policy, never released
            assert policy == "fail" and int(row["failed"]) >= 1, (pid, row)
            failed += 1
        else:
            assert n >= 1 and int(row["settled"]) == len(kids), (pid, row)
            released += n == 1
    for name in queues:
        assert await conn.command("HLEN", f"emq:{{{name}}}:finished") == 0, name
        assert await conn.command("ZCARD", f"emq:{{{name}}}:waiting") == 0, name
    return Audit(len(parents), sum(len(k) for _, _, k in parents.values()), released, failed,
                 doubles, len(early))
