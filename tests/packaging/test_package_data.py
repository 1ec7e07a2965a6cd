"""Every data file the packages read at run time is declared in pyproject's package-data.

An editable install reads the source tree and hides a missing glob; this test
does not need a build: each non-Python file under a package must match one of
that package's globs (the installed-wheel smoke test checks the built wheel).
"""

from __future__ import annotations

import tomllib
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[2]


def _matches(path: PurePosixPath, glob: str) -> bool:
    """Setuptools' glob: '*' stays inside one directory level."""
    return len(path.parts) == len(PurePosixPath(glob).parts) and path.match(glob)


def _declared() -> dict[str, list[str]]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return dict(data["tool"]["setuptools"]["package-data"])


def _data_files(package: str) -> list[PurePosixPath]:
    base = ROOT / "src" / package
    return [
        PurePosixPath(p.relative_to(base).as_posix())
        for p in base.rglob("*")
        if p.is_file() and p.suffix not in {".py", ".pyc"} and "__pycache__" not in p.parts
    ]


def test_every_data_file_matches_a_package_data_glob() -> None:
    declared = _declared()
    missing = []
    for package, globs in declared.items():
        files = _data_files(package)
        assert files, package
        for f in files:
            if not any(_matches(f, g) for g in globs):
                missing.append(f"{package}/{f}")
    assert not missing, f"not shipped in the wheel (add to package-data): {missing}"


def test_the_lua_includes_are_declared() -> None:
    globs = _declared()["echomq"]
    assert any(_matches(PurePosixPath("protocol/lua/include/now.lua"), g) for g in globs)
