"""No import circle in ``src/``, and EchoMQ's folders are layers that import only downward.

Every import between the project's modules is an arrow (module-level and inside
functions alike: a lazy import that closes a loop is still a loop, only hidden). A
package's ``__init__`` is its facade: it hands names on and is no room of its own, so
an arrow to it goes to the module it names when that is a module, and is not drawn
otherwise. The test fails naming each circle it finds.

EchoMQ's folders are its layers (docs/contributing.md draws them). A module may import
its own folder and the folders below it, never one beside or above it:

    core       pure values: errors, bounds, options, ids, outcomes
    protocol   the Lua scripts, their loader, keys, builders, decoders (pure)
    client     connectors, the wire, queues        servers   embedded Valkey, local cluster
    runtime    the consumer: leases, handlers, upkeep, supervision
    tasks      typed tasks on the client and runtime
    outbox     transactional enqueue from PostgreSQL (beside tasks: neither imports the other)
    ops        the command line, the worker, the dashboard, metrics

A ``from echomq import Name`` inside the package counts as an arrow to the module the
facade takes ``Name`` from, so the facade cannot hide an upward import.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"


def _modules() -> dict[str, Path]:
    out = {}
    for path in SRC.rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _arrows(modules: dict[str, Path]) -> dict[str, set[str]]:
    packages = {name for name, path in modules.items() if path.name == "__init__.py"}
    graph: dict[str, set[str]] = {m: set() for m in modules if m not in packages}
    for name in graph:
        for node in ast.walk(ast.parse(modules[name].read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
            for t in targets:
                if t in graph and t != name:
                    graph[name].add(t)
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


# Each folder's rank: an arrow must go to a lower rank (folders of one rank may not import
# each other). Top-level modules: echomq's facade loader (``_lazy``) is below everything,
# each package's console entry (``_entry``) above everything. Codemojex sits on echomq's
# facade; its own folders are layers too (docs/contributing.md draws both).
LAYERS = {
    "echomq": {"_lazy": -1, "core": 0, "protocol": 1, "client": 2, "servers": 2, "runtime": 3,
               "tasks": 4, "outbox": 4, "ops": 5, "_entry": 6},
    "codemojex": {"domain": 0, "wallet": 1, "infra": 1, "service": 2, "workers": 3, "game": 4,
                  "bot": 5, "chaos": 5, "ops": 6, "_entry": 7},
}


def _layer_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _facade_table() -> dict[str, str]:
    from echomq._lazy import names_of

    table = names_of((SRC / "echomq" / "__init__.py").read_text(encoding="utf-8"))
    return {name: module if module + "." + attr not in _modules() else module + "." + attr
            for name, (module, attr) in table.items()}


def _package_arrows(package: str) -> list[tuple[str, str]]:
    """(importer, imported) of every import between ``package``'s modules; inside echomq a
    name taken from the facade counts as an arrow to the module it comes from."""
    facade = _facade_table() if package == "echomq" else {}
    modules = _modules()
    out = []
    for name, path in modules.items():
        if not name.startswith(package + "."):  # the package's facade itself is no room
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                out += [(name, a.name) for a in node.names if a.name.startswith(package + ".")]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module == package and facade:
                    out += [(name, facade.get(a.name, f"{package}.{a.name}")) for a in node.names]
                elif node.module == package:
                    out += [(name, f"{package}.{a.name}") for a in node.names]
                elif node.module.startswith(package + "."):
                    out.append((name, node.module))
    return out


def _upward(arrows: list[tuple[str, str]], package: str = "echomq") -> list[str]:
    layers = LAYERS[package]
    wrong = []
    for src, dst in arrows:
        a, b = _layer_of(src), _layer_of(dst)
        if a == b:
            continue
        if a not in layers or b not in layers:
            wrong.append(f"{src} -> {dst}: a module outside the layers")
        elif layers[b] >= layers[a]:
            wrong.append(f"{src} -> {dst}: {a} may not import {b}")
    return sorted(set(wrong))


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_folders_import_only_downward(package: str) -> None:
    arrows = _package_arrows(package)
    assert len(arrows) > 100  # the graph was read
    assert _upward(arrows, package) == []


def test_an_upward_or_sideways_arrow_is_found() -> None:
    assert _upward([("echomq.core.model", "echomq.runtime.consumer")]) == [
        "echomq.core.model -> echomq.runtime.consumer: core may not import runtime"]
    assert _upward([("echomq.client.info", "echomq.servers.server")]) == [
        "echomq.client.info -> echomq.servers.server: client may not import servers"]
    assert _upward([("echomq.ops.cli", "echomq.servers.server")]) == []
    assert _upward([("codemojex.domain.scoring", "codemojex.wallet.money")], "codemojex") == [
        "codemojex.domain.scoring -> codemojex.wallet.money: domain may not import wallet"]


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_every_module_lives_in_a_layer(package: str) -> None:
    loose = [m for m in _modules() if m.startswith(package + ".") and _layer_of(m) not in LAYERS[package]]
    assert loose == []


def test_the_graph_is_read() -> None:
    graph = _arrows(_modules())
    assert "echomq.ops.dashboard.state" in graph["echomq.ops.dashboard.views"]
    assert "echomq.ops.dashboard.views" in graph["echomq.ops.dashboard.app"]


def test_no_import_circle_in_src() -> None:
    assert _circles(_arrows(_modules())) == []


def test_a_circle_is_found() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
