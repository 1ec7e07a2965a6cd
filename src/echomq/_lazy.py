"""A package facade whose names are imported on first use (PEP 562).

The facade's ``if TYPE_CHECKING:`` block is its one list of names: type checkers and
readers see ordinary ``from module import name`` lines; at run time :func:`attach`
reads that same block from the package's source and imports a name's module only when
the name is first asked for (``echomq.Queue``, ``from echomq import Queue``). So
``import echomq.ops.cli``, or any one module of the package, no longer imports the whole
library first: a command-line verb that fails on its arguments never loads redis-py.
The idea is Scientific Python's SPEC 1 (``lazy_loader.attach_stub``), with the block
read from the module itself instead of a ``.pyi`` stub (decision 0024).
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["attach", "names_of"]


def names_of(source: str) -> dict[str, tuple[str, str]]:
    """``{exported name: (module, attribute)}`` from the ``if TYPE_CHECKING:`` block of
    ``source``; anything in that block but absolute ``from ... import`` lines is refused."""
    table: dict[str, tuple[str, str]] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                if not isinstance(stmt, ast.ImportFrom) or stmt.module is None or stmt.level:
                    raise ImportError(f"line {stmt.lineno}: a lazy facade holds 'from <module> import' only")
                table |= {a.asname or a.name: (stmt.module, a.name) for a in stmt.names}
    return table


def attach(package: str, source_file: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, whose source is ``source_file``."""
    table = names_of(Path(source_file).read_text(encoding="utf-8"))
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        try:
            module, attribute = table[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        owner = importlib.import_module(module)
        try:
            value = getattr(owner, attribute)
        except AttributeError:  # a module of a subpackage (``from echomq.core import ids``)
            value = importlib.import_module(f"{module}.{attribute}")
        namespace[name] = value  # once: the next lookup does not come here
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *table})

    return __getattr__, __dir__
