"""The public facade: everything in __all__ exists, nothing connects at import, and the
game (src/codemojex) imports EchoMQ through this facade only."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import echomq

# Every name the facade exports, spelled out: a name added or dropped is a decision.
EXPORTED = [
    "PROTOCOL", "Ack", "AsyncClusterConnector", "AsyncConnector", "AsyncQueue", "AsyncScheduler",
    "BackPressure",
    "Backoff", "BackoffDelays", "BackoffPolicy", "Bulk", "ChildSpec", "Claimed", "ClusterConnector",
    "Completion",
    "ConfigurationError", "Connector",
    "Consumer", "ConsumerChild", "ConsumerOptions", "ConsumerStats", "Defer", "EchoMQError",
    "EmbeddedValkey", "Gate", "Handler", "InvalidArgument", "InvalidJobId", "InvalidPayload",
    "InvalidQueueName", "JobView", "Lease", "LocalCluster", "MemoryStatus", "Missed", "NotDurable",
    "Outcome",
    "PayloadTooLarge", "Producer", "ProducerClosed", "ProtocolVersionError", "Queue", "QueueNotFound",
    "QueueOptions", "RateLimit", "RetryOutcome", "Schedule", "Scheduler", "Script", "ScriptContractError",
    "ServerBusy", "ServerError",
    "ServerFull", "ServerUnavailable", "Stats", "Supervisor", "SupervisorGaveUp", "Verdict",
    "connect", "connect_async", "derive_id", "end_with_parent", "forget_server", "generate",
    "generate_many", "job_key",
    "memory_status", "memory_status_async", "parse_script", "queue_key", "run_until_signal",
    "server_url_from_env", "slot", "tick_of", "track_server", "valid",
    # sharded queues (decision 0020)
    "AsyncShardedQueue", "ShardedQueue", "ShardedConsumer", "ShardCountMismatch", "QueueNotDrained",
    "reshard", "reshard_async",
    # handler timeouts and hooks (docs/features.md)
    "HandlerCrashed", "HandlerTimeout", "Hooks",
    # results, progress and cancellation (decision 0023)
    "CancelOutcome", "CancelToken", "ProgressOutcome", "JobCancelled", "JobFailed", "JobNotFound",
    "ResultTimeout",
    # expiry (decision 0045)
    "JobExpired",
    # typed tasks (decision 0033)
    "App", "Task", "TaskCall", "TaskContext", "TaskHandle", "SyncTaskHandle", "TaskError",
    "UnknownTask", "UnreadablePayload", "Serializer", "MsgspecSerializer",
    # canvas and batches (decision 0041)
    "Signature", "chain", "chord", "group", "BatchHandle", "BatchStatus", "GroupHandle",
    "SyncBatchHandle", "SyncGroupHandle",
    # a flow job's shape and its own options (decisions 0038, 0041)
    "FlowSpec", "StepOptions",
]
# Public subpackages a user imports by name (``from echomq import dashboard``), each with
# its own ``__all__``: the dashboard plugin API (an extra: aiohttp), the CLI kit, id minting.
NAMESPACES = {
    "clikit": ["EXIT_BOUND_S", "EXPECTED", "Group", "describe", "short_connector"],
    "dashboard": ["DashboardOptions", "Page", "ago", "badge", "create_app", "esc", "serve", "table"],
    "ids": None,  # its own facade test: test_ids.py
    "keyspace": None,
    "outbox": ["CRASH_POINTS", "DEFAULT_TABLE", "BatchReport", "Outbox", "OutboxDatabaseError",
               "OutboxJob", "OutboxRelay", "OutboxTable", "job_id_of"],
    "tasks": ["ENVELOPE_VERSION", "AdmitOptions", "App", "MsgspecSerializer", "Serializer",
              "SyncTaskHandle", "Task", "TaskCall", "TaskContext", "TaskError", "TaskHandle",
              "UnknownTask", "UnreadablePayload", "Signature", "chain", "chord", "group",
              "BatchHandle", "BatchStatus", "GroupHandle", "SyncBatchHandle", "SyncGroupHandle",
              "Chain", "Chord", "Group", "Workflow"],
}
GAME = Path(__file__).resolve().parents[2] / "src" / "codemojex"


def test_the_facade_exports_exactly_the_listed_names() -> None:
    assert sorted(echomq.__all__) == sorted(EXPORTED)


def test_public_namespaces_export_what_they_list() -> None:
    for name, listed in NAMESPACES.items():
        try:
            mod = importlib.import_module(f"echomq.{name}")  # a folder of its own (tasks)
        except ModuleNotFoundError:
            mod = getattr(echomq, name)  # a module the facade names from its folder (ids, clikit)
        if listed is not None:
            assert sorted(mod.__all__) == sorted(listed), name
        for item in mod.__all__:
            assert hasattr(mod, item), (name, item)


def _echomq_imports(path: Path) -> list[tuple[str, str]]:
    """(module, name) of every ``import``/``from ... import`` of echomq in ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "echomq":
            out += [(node.module or "", a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            out += [(a.name, "echomq") for a in node.names if a.name.split(".")[0] == "echomq"]
    return out


def test_the_game_imports_echomq_through_the_facade_only() -> None:
    files = list(GAME.rglob("*.py"))
    assert files
    wrong = [f"{p.relative_to(GAME)}: {mod} {name}" for p in files
             for mod, name in _echomq_imports(p)
             if mod != "echomq" or name not in {*echomq.__all__, *NAMESPACES, "echomq"}]
    assert wrong == []


def test_all_names_exist_once() -> None:
    assert len(set(echomq.__all__)) == len(echomq.__all__)
    for name in echomq.__all__:
        assert getattr(echomq, name) is not None, name


def test_errors_share_one_root() -> None:
    for name in echomq.__all__:
        obj = getattr(echomq, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, echomq.EchoMQError), name


def test_import_has_no_side_effects() -> None:
    code = ("import socket, echomq, echomq.runtime.consumer, echomq.runtime.supervisor, echomq.ops.cli\n"
            "assert not [o for o in __import__('gc').get_objects() "
            "if isinstance(o, socket.socket)]")
    subprocess.run([sys.executable, "-c", code], check=True, env={"ECHOMQ_URL": "redis://127.0.0.1:1"})


def test_blocking_api_is_generated_from_async() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, str(root / "scripts" / "unasync_gen.py"), "--check"], check=True)


def test_id_minting_is_exported() -> None:
    from echomq.core import ids

    assert echomq.generate is ids.generate and echomq.generate_many is ids.generate_many
    assert [echomq.valid(x) for x in echomq.generate_many("JOB", 3)] == [True] * 3


def test_producer_is_exported() -> None:
    from echomq.client import producer

    assert echomq.Producer is producer.Producer and issubclass(echomq.ProducerClosed, echomq.EchoMQError)
