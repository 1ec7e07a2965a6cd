"""Client CPU per minted id: ``generate()`` one by one and ``generate_many()`` in batches.

    .venv/bin/python bench/ids_cpu.py [--ids 1000000] [--batch 1000] [--repeats 5]

Measures this process's CPU time (``time.process_time``), not wall time, over many ids,
and prints the best of ``--repeats`` runs in microseconds per id. No server involved.
On a machine other processes load, CPU time per id still rises (shared caches, a
sibling hyperthread), so quote the figure with the machine's load (printed too).
Issue 15's target is at most 0.5 µs per id for ``generate()``.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

from echomq.core import ids


def per_id(run: Callable[[int], object], n: int, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        run(n)
        best = min(best, time.process_time() - start)
    return best / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ids", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    generate, generate_many = ids.generate, ids.generate_many

    def one_by_one(n: int) -> None:
        for _ in range(n):
            generate("JOB")

    def listed(n: int) -> None:
        [generate("JOB") for _ in range(n)]

    def batched(n: int) -> None:
        for _ in range(n // args.batch):
            generate_many("JOB", args.batch)

    def empty_loop(n: int) -> None:
        for _ in range(n):
            pass

    n = args.ids
    load = os.getloadavg()[0]
    print(f"load average {load:.1f} on {os.cpu_count()} cpus; {n:,} ids, best of {args.repeats}")
    print(f"generate() in a loop             {per_id(one_by_one, n, args.repeats):.3f} µs/id")
    print(f"[generate() for ...] (a list)    {per_id(listed, n, args.repeats):.3f} µs/id")
    print(f"generate_many(kind, {args.batch})        {per_id(batched, n, args.repeats):.3f} µs/id")
    print(f"(the bare Python loop            {per_id(empty_loop, n, args.repeats):.3f} µs/iteration)")


if __name__ == "__main__":
    main()
