#!/usr/bin/env bash
# The test command: set up .venv, lint, type-check, check the generated sync code, run every test.
#
#   bash scripts/test.sh            everything: lint, types, generated code, every test
#   bash scripts/test.sh --quick    the same checks, then the tests without the slow fault
#                                   groups and the cluster group (-m "not slow and not cluster")
#   bash scripts/test.sh ARGS...    pytest arguments pass through (a file, -k, -x, -n 0 ...)
#
# The tests run in parallel (pytest-xdist, ECHOMQ_TEST_WORKERS processes, 4 by default): each
# worker starts its own embedded Valkey, PostgreSQL and local cluster when it first needs
# them, so workers never share a server. Most of a test's time is waiting on servers, so
# more workers than cores pays (docs/contributing.md has the figures).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/bootstrap.sh"
cd "$root"
marks=()
if [ "${1:-}" = "--quick" ]; then
    shift
    marks=(-m "not slow and not cluster")
fi
# Python's bytecode cache on (a shell may set PYTHONDONTWRITEBYTECODE): without it every
# worker and every Python child a test starts compiles src/ and tests/ (and pytest rewrites
# each test module's asserts) afresh, about 6 s of CPU per worker's collection.
unset PYTHONDONTWRITEBYTECODE
.venv/bin/ruff check .
.venv/bin/mypy
.venv/bin/python scripts/unasync_gen.py --check
exec .venv/bin/pytest -n "${ECHOMQ_TEST_WORKERS:-4}" --dist worksteal "${marks[@]}" "$@"
