"""No import circle in ``src/``: the modules of each package form layers.

Every import between the project's modules is an arrow (module-level and inside
functions alike: a lazy import that closes a loop is still a loop, only hidden). A
package's ``__init__`` is its facade: it hands names on and is no room of its own, so
an arrow to it goes to the module it names when that is a module, and is not drawn
otherwise. The test fails naming each circle it finds.
"""

from __future__ import annotations

import ast
from pathlib import Path

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


def test_the_graph_is_read() -> None:
    graph = _arrows(_modules())
    assert "echomq.dashboard.state" in graph["echomq.dashboard.views"]
    assert "echomq.dashboard.views" in graph["echomq.dashboard.app"]


def test_no_import_circle_in_src() -> None:
    assert _circles(_arrows(_modules())) == []


def test_a_circle_is_found() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
