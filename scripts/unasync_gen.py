"""Generate the blocking code and its tests from the asyncio ones (after httpcore's unasync.py).

    python scripts/unasync_gen.py          rewrite every generated tree
    python scripts/unasync_gen.py --check  fail if a checked-in copy is out of date (CI)

Two trees are written once for asyncio and generated for the blocking API:

    src/echomq/client/_async/*.py  ->  src/echomq/client/_sync/*.py  the library
    tests/echomq/_async/*.py  ->  tests/echomq/_sync/*.py   its API tests, so both
                                                            APIs run the same assertions

An asyncio test module left outside tests/echomq/_async/ (a Consumer's, a race's) gets no
twin and says why in ``ASYNC_ONLY`` below; tests/echomq/test_unasync_gen.py checks that
every such module is listed and no listed one is gone.

Every substitution rule must fire in at least one file: a rule that never fires is dead
(its source was renamed or removed, and the rule could hide a later mistake), and the
generator fails naming it, in both modes. A generated file with no source left is
reported as stale too (and removed when writing).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TREES = [
    (ROOT / "src" / "echomq" / "client" / "_async", ROOT / "src" / "echomq" / "client" / "_sync"),
    (ROOT / "tests" / "echomq" / "_async", ROOT / "tests" / "echomq" / "_sync"),
]

REPLACEMENTS = [
    (r"\bimport redis\.asyncio as redis_client\b", "import redis as redis_client"),
    (r"^import asyncio\n", ""),
    (r"\basyncio\.sleep\b", "time.sleep"),
    (r"\basync def\b", "def"),
    (r"\basync with\b", "with"),
    (r"\bawait ", ""),
    (r"\bAsyncConnector\b", "Connector"),
    (r"\bAsyncQueue\b", "Queue"),
    (r"\bAsyncShardedQueue\b", "ShardedQueue"),
    (r"\bAsyncShardedBase\b", "ShardedBase"),
    (r"\bAsyncUpkeep\b", "Upkeep"),
    (r"\bAsyncAdmission\b", "Admission"),
    (r"\bAsyncFlows\b", "Flows"),
    (r"\bAsyncScheduler\b", "Scheduler"),
    (r"\bAsyncClusterConnector\b", "ClusterConnector"),
    (r"\bAsyncWire\b", "Wire"),
    (r"\bAsyncStream\b", "Stream"),
    (r"\bAsyncIterator\b", "Iterator"),
    (r"\bAwaitable\[(\w+(?:\[\w+\])?)\]", r"\1"),  # a callable's awaited result: the result
    (r"\bAwaitable, ", ""),
    (r"\bconnect_async\b", "connect"),
    (r"\becho" r"mq\.client\._async\b", "echomq.client._sync"),
    (r"\btests\.echo" r"mq\._async\b", "tests.echomq._sync"),
    (r"\baclose\b", "close"),
    (r"\b(fan_out(?:_each)?)_async\b", r"\1"),
    (r"__aenter__", "__enter__"),
    (r"__aexit__", "__exit__"),
    (r"The asyncio implementation\.[^\"]*",
     "The blocking implementation, generated from echomq/client/_async."),
    (r"The asyncio API tests\.[^\"]*", "The blocking API tests, generated from tests/echomq/_async."),
]
# The asyncio test modules of tests/echomq/ that have no generated blocking twin, each with
# its reason (tests/echomq/test_unasync_gen.py fails on an async test module outside
# _async/ that is not listed, and on a listed one that is gone). A module whose tests the
# blocking API could run moves into tests/echomq/_async/ instead; mind the time: a twin
# doubles its module's run, so the long consumer and fault modules stay asyncio only.
ASYNC_ONLY = {
    "test_admission_verb.py": "compares admit with lanes.enqueue, an asyncio-only door",
    "test_cancel_races.py": "two calls in flight at once (asyncio.gather); the rest: _async/test_cancel.py",
    "test_expiry_surfaces.py": "consumers, sharded queues, tasks, flows and the operator's surfaces "
                                "around expiry; the API's own tests: _async/test_expiry.py",
    "test_flows.py": "flows across two queues on both topologies; the API is one module (flows.py), "
                     "generated, and its blocking twin shares every script",
    "test_flow_trees.py": "nested flows through the generated flows API, as test_flows.py",
    "test_flow_options.py": "a flow job's options through the generated flows API, as test_flows.py",
    "test_flow_faults.py": "consumer processes killed with SIGKILL while flows run; slow",
    "test_claim_gate.py": "competing claimers, Consumers, a 1,200-job flood; API part: _async/test_gate",
    "test_cluster.py": "failover under load from Consumers and Producers (asyncio only); slow, cluster only",
    "test_consumer.py": "the Consumer and the Supervisor are asyncio only",
    "test_consumer_cancel.py": "a Consumer cancelling its handler (asyncio only)",
    "test_consumer_child.py": "ConsumerChild under a Supervisor (asyncio only)",
    "test_dashboard_units.py": "the dashboard (aiohttp) reads async; its actions: _async/test_dead_jobs",
    "test_dedupe_windows.py": "raw script calls, memory and sharded queues; the API: _async/test_dedupe",
    "test_declared_keys.py": "checks the scripts, not the API: each script runs once through a checked copy",
    "test_derive_id.py": "pure id tests; its admission runs on both APIs in the module itself",
    "test_direct_runs.py": "the Consumer's handler threads (asyncio only)",
    "test_drain_path.py": "the Consumer's drain path (asyncio only)",
    "test_edge.py": "drives the async and the blocking API side by side itself",
    "test_faults.py": "consumer processes killed and stopped (asyncio Consumers); slow",
    "test_fence_everywhere.py": "the fence is in every script both APIs call; its Consumers: asyncio only",
    "test_handoff.py": "a parked Consumer's hand-off (asyncio only)",
    "test_hooks.py": "hooks around a Consumer's handler (asyncio only)",
    "test_info.py": "echomq.client.info has no blocking twin (the CLI and dashboard run it on asyncio)",
    "test_lanes_enqueue.py": "echomq.client.lanes.enqueue is asyncio only",
    "test_memory_limit.py": "a full server drained by Consumers (asyncio only), one small server per module",
    "test_metrics.py": "the worker's metrics hooks on a Consumer (asyncio only)",
    "test_process_pool.py": "the Consumer's process pool (asyncio only); the worker CLI as a subprocess",
    "test_producer.py": "the Producer is asyncio only",
    "test_refusals.py": "a running Consumer ridden through refusals (asyncio only)",
    "test_resend_verdicts.py": "a proxy fixture per topology; the blocking resend has its own test here",
    "test_results.py": "waiters as asyncio tasks racing the end; blocking result() tested here in a thread",
    "test_run_cancelled.py": "a Consumer's and a Supervisor's run() cancelled, the process pool's "
                             "kill under a cancel (asyncio only)",
    "test_schedules.py": "AsyncScheduler tasks and the blocking Scheduler in threads side by side, a worker",
    "test_seam.py": "checks both seams (the async one and its generated copy) itself",
    "test_bytes_bounded.py": "bounds of the protocol layer both APIs share; memory runs on own servers",
    "test_priority_history.py": "a property over the server's claim order: the scripts', whichever API",
    "test_mutation_probes.py": "probes shared with scripts/mutation_check.py, which runs them in asyncio",
    "test_one_id_across_shards.py": "kills a producer process between its two steps; reshard runs",
    "test_sharded_name.py": "the refusal is the scripts' version check, whichever API calls them",
    "test_online_reshard.py": "producers and a ShardedConsumer run as asyncio tasks during the reshard",
    "test_sharded_gate.py": "ShardedConsumers counted against the logical limit (asyncio only)",
    "test_sharded_pool.py": "the ShardedConsumer's shared slot pool (asyncio only)",
    "test_sharded_worker.py": "echomq worker as a process and an AsyncScheduler onto the shards",
    "test_sharded_cluster.py": "a ShardedConsumer through a primary's kill -9 (asyncio only); cluster only",
    "test_sharding.py": "ShardedConsumer and ConsumerChild (asyncio only) over the sharded queue",
    "test_stream.py": "the hand-written asyncio stream's read watchdog (the blocking Stream "
                      "uses its socket's own timeout)",
    "test_timeouts.py": "a Consumer's handler timeouts (asyncio only)",
    "test_tracing.py": "spans around a Consumer's handler (asyncio only)",
    "test_wake_link.py": "the Consumer's wake link (asyncio only)",
    "test_worker.py": "echomq worker processes (asyncio Consumers)",
}
BANNER = "# Generated from {source} by scripts/unasync_gen.py. Do not edit.\n"


class DeadRule(Exception):
    """A substitution rule that fired in no file."""


def convert(src: Path, dst: Path, text: str, fired: list[int]) -> str:
    """The generated text of ``src`` (written at ``dst``); counts each rule's hits in ``fired``."""
    for i, (pattern, repl) in enumerate(REPLACEMENTS):
        text, hits = re.subn(pattern, repl, text, flags=re.M)
        fired[i] += hits
    text = BANNER.format(source=src.relative_to(ROOT).as_posix().removeprefix("src/")) + text
    # Renamed classes can change import and __all__ order, and an `async with` around a
    # `with` becomes two nested `with`s: let ruff fix both the way it checks them, so the
    # generated copy is lint-clean by construction.
    ruff = Path(sys.executable).with_name("ruff")
    return subprocess.run(
        [str(ruff), "check", "--select", "I,RUF022,SIM117", "--fix-only", "--quiet",
         "--stdin-filename", str(dst), "-"],
        input=text, capture_output=True, text=True, check=True,
    ).stdout


def generate() -> dict[Path, str | None]:
    """Every generated file and its wanted text (None: no source left, remove it).

    Raises :class:`DeadRule` when a rule fired nowhere."""
    fired = [0] * len(REPLACEMENTS)
    want: dict[Path, str | None] = {}
    for src_dir, dst_dir in TREES:
        for src in sorted(src_dir.glob("*.py")):
            dst = dst_dir / src.name
            want[dst] = convert(src, dst, src.read_text(), fired)
        for old in sorted(dst_dir.glob("*.py")):
            want.setdefault(old, None)
    dead = [pattern for (pattern, _), hits in zip(REPLACEMENTS, fired, strict=True) if not hits]
    if dead:
        raise DeadRule("substitution rules that never fire (remove them): " + ", ".join(dead))
    return want


def main(check: bool) -> int:
    try:
        want = generate()
    except DeadRule as exc:
        print(exc, file=sys.stderr)
        return 1
    stale = []
    for dst, text in want.items():
        current = dst.read_text() if dst.exists() else None
        if current == text:
            continue
        stale.append(dst)
        if check:
            continue
        if text is None:
            dst.unlink()
        else:
            dst.parent.mkdir(exist_ok=True)
            dst.write_text(text)
    if check and stale:
        print("out of date (run scripts/unasync_gen.py):", *map(str, stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main("--check" in sys.argv[1:]))
