#!/usr/bin/env bash
# Create .venv and install both distributions (echomq with its dev tools, and codemojex from
# packages/codemojex) editable, once per change of either pyproject.toml.
# Sourced by scripts/test.sh and scripts/play.sh; safe to run on a machine with nothing installed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
py="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
    "$py" -m venv "$venv"
fi
stamp="$venv/.installed-$(cat "$root/pyproject.toml" "$root/packages/codemojex/pyproject.toml" | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    "$venv/bin/python" -m pip install --quiet -e "$root[dev]" -e "$root/packages/codemojex"
    rm -f "$venv"/.installed-*
    touch "$stamp"
fi
# The dashboard's browser tests drive Debian's chromium (never a downloaded browser build).
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null
fi
# The reliability tests shift clocks with libfaketime and cut links with iptables inside a
# network namespace they create (Debian's packages; skipped with a reason when absent).
if { ! command -v faketime >/dev/null 2>&1 || ! command -v iptables >/dev/null 2>&1; } \
        && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq faketime iptables) >/dev/null
fi
