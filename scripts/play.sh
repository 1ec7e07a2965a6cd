#!/usr/bin/env bash
# The main job: set up .venv, then play Codemojex on embedded Valkey and PostgreSQL. Arguments pass through.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/bootstrap.sh"
exec "$root/.venv/bin/codemojex" play "$@"
