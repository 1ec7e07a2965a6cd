"""The connector seam (``echomq.client._async.seam``): both connectors implement it, the queue
is typed against it, and it names no ``Any``."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from echomq import AsyncClusterConnector, AsyncConnector, ClusterConnector, Connector
from echomq.client._async import seam as async_seam
from echomq.client._sync import seam as sync_seam

SRC = Path(async_seam.__file__).parent.parent


def _methods(proto: type) -> dict[str, inspect.Signature]:
    return {n: inspect.signature(f) for n, f in vars(proto).items()
            if inspect.isfunction(f) and not n.startswith("_")}


def _accepts(impl: inspect.Signature, wanted: inspect.Signature) -> bool:
    kinds = {p.kind for p in impl.parameters.values()}
    for p in wanted.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            if p.kind not in kinds:
                return False
        elif p.name not in impl.parameters and p.VAR_KEYWORD not in kinds:
            return False
    return True


@pytest.mark.parametrize(("proto", "impls"), [
    (async_seam.ScriptConnector, (AsyncConnector, AsyncClusterConnector)),
    (sync_seam.ScriptConnector, (Connector, ClusterConnector)),
])
def test_both_connectors_have_every_method_of_the_seam(proto: type, impls: tuple[type, ...]) -> None:
    wanted = _methods(proto)
    assert {"command", "eval", "run", "pipeline", "flush", "pipeline_wait", "load",
            "wake_subscription", "server_time_ms"} <= set(wanted)
    for impl in impls:
        for name, sig in wanted.items():
            method = getattr(impl, name)
            assert _accepts(inspect.signature(method), sig), (impl, name)
            assert inspect.iscoroutinefunction(method) == inspect.iscoroutinefunction(
                vars(proto)[name]), (impl, name)


async def test_a_connector_instance_is_a_script_connector() -> None:
    conn = AsyncConnector.from_url("redis://127.0.0.1:1")
    cluster = AsyncClusterConnector.from_url("redis+cluster://127.0.0.1:1")
    blocking = Connector.from_url("redis://127.0.0.1:1")
    try:
        assert isinstance(conn, async_seam.ScriptConnector)
        assert isinstance(cluster, async_seam.ScriptConnector)
        assert isinstance(blocking, sync_seam.ScriptConnector)
        assert not isinstance(object(), async_seam.ScriptConnector)
    finally:
        await conn.aclose()
        await cluster.aclose()
        blocking.close()


def test_the_seam_names_no_any() -> None:
    for tree in ("_async", "_sync"):
        source = (SRC / tree / "seam.py").read_text()
        assert not re.search(r"\bAny\b", source), tree
    queue = (SRC / "_async" / "queue.py").read_text()
    assert "AsyncConnector" not in queue and "AsyncClusterConnector" not in queue
