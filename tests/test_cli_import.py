"""Importing a command line is light, and EchoMQ's facade imports a name's module on first use.

``import echomq.ops.cli`` (and ``codemojex.ops.cli``) load click and little else: redis-py, rich,
aiohttp, OpenTelemetry, Prometheus, the consumer, the dashboard and PostgreSQL's driver
are imported inside the verbs that need them. So a command refused for its arguments
answers before any of them is loaded: the CLI failure tests do not depend on how long
a loaded machine takes to import a client library. What is loaded is asserted (a
count of modules, never a time).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import echomq
from echomq._lazy import names_of

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("redis", "rich", "aiohttp", "opentelemetry", "prometheus_client", "psycopg", "psycopg_pool",
         "aiogram", "asyncio", "echomq.runtime.consumer", "echomq.ops.dashboard",
         "echomq.client._async.connector")


def _loaded(code: str) -> list[str]:
    """The heavy modules loaded after running ``code`` in a fresh interpreter."""
    probe = f"{code}\nimport sys, json\nprint(json.dumps(sorted(m for m in sys.modules if m in {HEAVY!r})))"
    env = {"PYTHONPATH": f"{ROOT / 'src'}:{ROOT}", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout.splitlines()[-1]))


@pytest.mark.parametrize("module", ["echomq", "echomq.ops.cli", "codemojex.ops.cli"])
def test_importing_loads_no_heavy_module(module: str) -> None:
    assert _loaded(f"import {module}") == []


@pytest.mark.parametrize(("cli", "args"), [
    ("echomq.ops.cli", ["info"]), ("echomq.ops.cli", ["stats", "a{b}", "--url", "redis://127.0.0.1:1"]),
    ("echomq.ops.cli", ["browse", "q", "pending", "--limit", "abc"]), ("echomq.ops.cli", ["nonsense"]),
    ("codemojex.ops.cli", ["play", "--players", "abc"]),
])
def test_a_command_refused_for_its_arguments_loads_no_client_library(cli: str, args: list[str]) -> None:
    code = (f"from {cli} import main\ntry:\n    main.main({args!r}, prog_name='x')\n"
            "except SystemExit as exc:\n    assert exc.code != 0, exc.code")
    loaded = _loaded(code)
    assert not [m for m in loaded if m.split(".")[0] in {"redis", "aiohttp", "psycopg", "aiogram"}], loaded


def test_a_verb_loads_what_it_needs() -> None:
    code = ("from echomq.ops.cli import main\ntry:\n    main.main(['info', '--url', 'redis://127.0.0.1:1'])\n"
            "except SystemExit as exc:\n    assert exc.code == 1")
    assert {"redis", "asyncio", "echomq.client._async.connector"} <= set(_loaded(code))


def test_importing_the_bot_loads_no_aiogram() -> None:
    """``aiogram.types`` builds the schemas of its 444 types on import (seconds of CPU): the
    bot's modules, which the tests import at collection, leave it to ``make_bot`` and the
    send (the bot's own tests show those work)."""
    assert "aiogram" not in _loaded("import codemojex.bot\nimport codemojex.bot.telegram")


def test_the_facade_table_is_its_exports() -> None:
    table = names_of((ROOT / "src" / "echomq" / "__init__.py").read_text(encoding="utf-8"))
    # the public namespaces (tests/echomq/test_facade.py NAMESPACES) are modules, not in __all__
    assert sorted(table) == sorted([*echomq.__all__, "clikit", "dashboard", "ids", "keyspace"])
    assert set(echomq.__all__) <= set(dir(echomq))


def test_a_facade_name_is_the_object_of_its_module() -> None:
    from echomq.client._sync.queue import Queue
    from echomq.core.model import PROTOCOL

    assert echomq.Queue is Queue and echomq.PROTOCOL == PROTOCOL
    assert echomq.memory_status_async.__module__ == "echomq.client._async.memory"  # an alias resolves too
    with pytest.raises(AttributeError, match="no attribute 'Qeue'"):
        _ = echomq.Qeue  # type: ignore[attr-defined]
    with pytest.raises(ImportError, match="cannot import name 'Qeue'"):
        exec("from echomq import Qeue", {})


def test_a_facade_block_holds_only_from_imports() -> None:
    good = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from a.b import C as D, E\n"
    assert names_of(good) == {"D": ("a.b", "C"), "E": ("a.b", "E")}
    for bad in ("if TYPE_CHECKING:\n    import a\n", "if TYPE_CHECKING:\n    from . import a\n",
                "if TYPE_CHECKING:\n    X = 1\n"):
        with pytest.raises(ImportError, match="from <module> import"):
            names_of(bad)
