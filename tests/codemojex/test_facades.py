"""The public facades export what they list, and importing them has no side effects."""

from __future__ import annotations

import importlib

import pytest

from codemojex.domain.errors import ConfigurationError
from codemojex.infra.pg import ENV_URL, PgServer


@pytest.mark.parametrize("module", ["codemojex.domain", "codemojex.wallet", "codemojex.infra.pg"])
def test_all_names_exist(module: str) -> None:
    mod = importlib.import_module(module)
    for name in mod.__all__:
        assert hasattr(mod, name), name


def test_external_url_is_used_as_is_and_never_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_URL, "postgresql://u@example.invalid/db")
    server = PgServer.from_env()
    assert not server.embedded
    assert server.start() == "postgresql://u@example.invalid/db"
    server.stop()
    assert server.url == "postgresql://u@example.invalid/db"


def test_url_before_start_is_misuse() -> None:
    with pytest.raises(ConfigurationError):
        _ = PgServer(data_dir="/nonexistent/x").url
