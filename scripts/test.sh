#!/usr/bin/env bash
# The test command: set up .venv, lint, type-check, check the generated sync code, run every test.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/bootstrap.sh"
cd "$root"
.venv/bin/ruff check .
.venv/bin/mypy
.venv/bin/python scripts/unasync_gen.py --check
exec .venv/bin/pytest "$@"
