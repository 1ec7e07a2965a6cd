#!/usr/bin/env bash
# The main job: set up .venv, then run the demo on embedded servers. Arguments pass through.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/bootstrap.sh"
exec "$root/.venv/bin/echomq" demo "$@"
