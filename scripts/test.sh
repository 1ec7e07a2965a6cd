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
# A fresh clone has no bytecode: compile src/ and the tests' helper modules once, on both
# cores, rather than in each worker and each Python child the tests start (pytest rewrites
# and caches the test modules themselves). Only a speed-up: a file that does not compile
# is the tests' to report.
.venv/bin/python -m compileall -qq -j 0 -x '/test_[^/]*[.]py$' src tests || true
# mypy (12 s of CPU on one core with a fresh clone's empty cache) and the generated code's
# check run beside the tests rather than before them: the tests' servers leave a core idle
# for much of the run. Their output comes after the tests'; either failing fails the command.
checks_log="$(mktemp)"
trap 'rm -f "$checks_log"' EXIT
{ .venv/bin/mypy && .venv/bin/python scripts/unasync_gen.py --check; } >"$checks_log" 2>&1 &
checks=$!
status=0
.venv/bin/pytest -n "${ECHOMQ_TEST_WORKERS:-4}" --dist worksteal "${marks[@]}" "$@" || status=$?
checks_status=0
wait "$checks" || checks_status=$?
cat "$checks_log"
if [ "$checks_status" -ne 0 ]; then
    echo "scripts/test.sh: mypy or the generated code's check failed (above)" >&2
    exit 1
fi
exit "$status"
