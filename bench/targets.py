"""Issue 15's targets, evaluated on one run's results.json (standard library only: the
orchestrator and the report, in different venvs, both import it).

    python bench/targets.py [docs/benchmarks/results.json]   # prints the table; exit 1 if one is missed

Every ratio is within the one run. The memory target is met either by a figure at or below
taskiq's or, as the issue allows, by a decision note that shows the floor (named in the row).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MEMORY_NOTE_GLOB = "docs/decisions/*-memory-floor.md"  # the decision note on the memory floor
MOONSHOT = 161_192


def g(d: Any, *path: str, default: float = 0.0) -> Any:
    for p in path:
        if not isinstance(d, dict) or p not in d:
            return default
        d = d[p]
    return d


def evaluate(res: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per target: figure, today, target, measured text, met."""
    fig = res["figures"]
    e = fig.get("echomq", {})
    peers = [s for s in fig if s != "echomq"]
    # The limit of the script the bulk rows use: enqueue_batch.lua as enqueue_many sends it
    # (one call of N; in lists of 1,000 for the sequential row). A results.json from before
    # the batch script has only enqueue.lua's limit, the script bulk admission used then.
    lims = res.get("limits", {})
    lim_key = "batch_time" if "batch_time" in lims else "enqueue_time"
    seq_key = "batch_seq_time" if "batch_seq_time" in lims else lim_key
    lim_t = g(res, "limits", lim_key, "rate", default=1e-9)
    lim_s = g(res, "limits", seq_key, "rate", default=1e-9)
    lim_name = {"batch_time": "enqueue_batch.lua as enqueue_many sends it",
                "batch_seq_time": "enqueue_batch.lua in lists of 1,000",
                "enqueue_time": "enqueue.lua"}

    def best(op: str) -> str:
        return max(peers, key=lambda s: max(g(fig[s], op, "rate"), g(fig[s], op + "_alt", "rate")))

    def peer_rate(s: str, op: str) -> float:
        return float(max(g(fig[s], op, "rate"), g(fig[s], op + "_alt", "rate")))

    rows: list[dict[str, Any]] = []

    def row(figure: str, today: str, target: str, measured: str, met: bool) -> None:
        rows.append({"figure": figure, "today": today, "target": target, "measured": measured, "met": met})

    b1, bs, bp = g(e, "bulk", "rate"), g(e, "bulk_seq", "rate"), g(e, "producer", "rate")

    def ratio(op: str, rate: float, lim: float) -> tuple[str, float]:
        """The paired figure when the run has one (bench.py ``paired``: the limit and the row
        back to back, the median of the pairs' ratios; it decides), else rate ÷ limit."""
        pairs = g(e, "paired", op, "pairs", default=[])
        if not pairs:
            return f"{rate:,.0f} ÷ {lim:,.0f} = {rate / lim:.2f}×", rate / lim
        median = float(g(e, "paired", op, "ratio"))
        each = ", ".join(f"{x['ratio']:.2f}" for x in sorted(pairs, key=lambda x: x["ratio"]))
        return (f"{median:.2f}×, the median of {len(pairs)} back-to-back pairs ({each}); "
                f"medians of the separate rows: {rate:,.0f} ÷ {lim:,.0f} = {rate / lim:.2f}×"), median

    text, got = ratio("bulk", b1, lim_t)
    row("bulk admission (one enqueue_many call, ids minted in the window, 64 B) ÷ server limit "
        f"of the script it uses ({lim_name[lim_key]}, same N, time-ordered ids)", "0.40–0.58×",
        "≥ 0.9×", text, got >= 0.9)
    text, got = ratio("bulk_seq", bs, lim_s)
    row(f"sequential enqueue_many calls of 1,000 ÷ server limit ({lim_name[seq_key]})",
        "0.40–0.58×", "≥ 0.9×", f"{text} (Producer.put one by one: {bp / lim_s:.2f}×)", got >= 0.9)
    bb = best("bulk") if peers else ""
    pb = peer_rate(bb, "bulk") if peers else 1e-9
    row("bulk admission ÷ fastest peer's bulk path", "2.5–3.4×", "≥ 6×",
        f"{b1:,.0f} ÷ {pb:,.0f} ({bb}) = {b1 / pb:.1f}×", b1 / pb >= 6)
    ids = g(e, "ids", "generate_us", default=99.0)
    row("client CPU per id minted (generate())", "3.5 µs", "≤ 0.5 µs",
        f"{ids:.3f} µs, best of {g(e, 'ids', 'repeats', default=1):.0f} passes (median "
        f"{g(e, 'ids', 'generate_median_us', default=ids):.3f}; generate_many: "
        f"{g(e, 'ids', 'generate_many_us'):.3f} µs)", ids <= 0.5)
    life = g(e, "drain", "life_server_us", default=999.0)
    row("server CPU per job over its life (admit + claim + complete)", "22 µs", "≤ 15 µs",
        f"{life:.1f} µs (admit {g(e, 'drain', 'fill_server_us'):.1f} + claim/complete "
        f"{g(e, 'drain', 'server_us'):.1f})", life <= 15)
    bd = best("drain") if peers else ""
    pd = peer_rate(bd, "drain") if peers else 1e-9
    d = g(e, "drain", "rate")

    def at(x: Any) -> str:  # the concurrency of a sweep's best point (issue 30 item 2)
        c = g(x, "drain", "concurrency", default=None)
        return "" if c is None else f" at concurrency {c}"
    row("drain, one worker process, ÷ fastest peer (same N; each system's best point of its "
        "concurrency sweep)", "11×", "≥ 15×",
        f"{d:,.0f}{at(e)} ÷ {pd:,.0f} ({bd}{at(fig.get(bd, {}))}) = {d / pd:.1f}×", d / pd >= 15)
    # issue 30 item 2: the drain's own limit (bench/limit.py --script drain), at the batch of
    # EchoMQ's best point when that is not the default's 32 (``drain_best``)
    lim_key = "drain_best" if "drain_best" in lims else "drain"
    lim_d = g(res, "limits", lim_key, "rate", default=0.0)
    if lim_d:
        row("drain, one worker process, ÷ the drain's limit (complete_batch + claim + peek "
            f"replayed at {g(lims, lim_key, 'batch', default=32)} jobs a flush, same N)", "—", "≥ 0.8×",
            f"{d:,.0f} ÷ {lim_d:,.0f} = {d / lim_d:.2f}×", d / lim_d >= 0.8)
    p50, p99 = g(e, "latency", "p50_ms", default=99.0), g(e, "latency", "p99_ms", default=99.0)
    row("idle admission-to-handler latency p50 / p99", "0.8–1.4 / 3.6–4.7 ms", "≤ 0.5 / ≤ 2 ms",
        f"{p50:.2f} / {p99:.2f} ms ({g(e, 'latency', 'n'):.0f} samples)", p50 <= 0.5 and p99 <= 2)
    mem = g(e, "memory", "bytes_per_job", default=1e9)
    tq = min((g(fig[s], "memory", "bytes_per_job", default=1e9) for s in peers if s.startswith("taskiq")),
             default=1e9)
    notes = sorted(ROOT.glob(MEMORY_NOTE_GLOB))
    note = bool(notes)
    name = notes[0].relative_to(ROOT).as_posix() if notes else ""
    row("server memory per queued job, 64-byte payload", "308 B (taskiq 217 B)",
        "≤ taskiq, or a decision note showing the floor",
        f"{mem:.0f} B (taskiq {tq:.0f} B)" + (f"; floor shown in {name}" if mem > tq and note else ""),
        "memory" in e and "bytes_per_job" in e["memory"] and (mem <= tq or note))
    row("moonshot: admissions/s through the public API, ids minted in the window", "~74k", f"{MOONSHOT:,}/s",
        f"{b1:,.0f}/s", b1 >= MOONSHOT)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    out = ["| figure | today | target | measured | met? |", "|---|---|---|---|---|"]
    out += [f"| {r['figure']} | {r['today']} | {r['target']} | {r['measured']} | "
            f"{'yes' if r['met'] else '**no**'} |" for r in rows]
    return "\n".join(out)


def main() -> int:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs/benchmarks/results.json"
    rows = evaluate(json.loads(path.read_text()))
    print(table(rows))
    missed = [r["figure"] for r in rows if not r["met"]]
    if missed:
        print(f"\n{len(missed)} target(s) missed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
