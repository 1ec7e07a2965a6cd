"""Sum and rank the per-test CPU lines written by ``ECHOMQ_TEST_CPU=DIR pytest ...``.

    python scripts/suite_cpu.py DIR [N]     totals, then the N costliest files and tests
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path


def main(folder: str, top: int = 40) -> None:
    rows = [json.loads(line) for f in sorted(Path(folder).glob("*.jsonl"))
            for line in f.read_text().splitlines() if line.strip()]
    cpu, wall = sum(r["cpu"] for r in rows), sum(r["wall"] for r in rows)
    print(f"{len(rows)} tests: CPU {cpu / 60:.1f} min, test wall (summed over workers) {wall / 60:.1f} min")
    per_worker: dict[str, float] = defaultdict(float)
    for r in rows:
        per_worker[r["worker"]] += r["wall"]
    print("wall per worker:", ", ".join(f"{w} {s / 60:.1f} min" for w, s in sorted(per_worker.items())))
    files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for r in rows:
        f = files[r["id"].split("::", 1)[0]]
        f[0] += r["cpu"]
        f[1] += r["wall"]
        f[2] += 1
    print(f"\n{'cpu s':>8} {'wall s':>8} {'tests':>6}  file")
    for name, (c, w, n) in sorted(files.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"{c:8.1f} {w:8.1f} {n:6d}  {name}")
    print(f"\n{'cpu s':>8} {'wall s':>8}  test")
    for r in sorted(rows, key=lambda r: -r["cpu"])[:top]:
        print(f"{r['cpu']:8.1f} {r['wall']:8.1f}  {r['id']}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 40)
