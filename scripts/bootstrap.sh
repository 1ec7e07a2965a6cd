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
# Debian packages, installed as root. Two bootstraps at once (play.sh in one checkout, test.sh
# in another) meet at the system package lock: wait for it (DPkg::Lock::Timeout, 10 minutes)
# instead of failing. `apt-get update` holds the package lists' lock, which that option does
# not cover on every apt release, so a refused update is retried for as long.
apt_wait=(-o DPkg::Lock::Timeout=600)
apt_install() {
    local tries=0
    until apt-get "${apt_wait[@]}" update -qq >/dev/null; do
        tries=$((tries + 1))
        if [ "$tries" -ge 60 ]; then return 1; fi
        sleep 10
    done
    DEBIAN_FRONTEND=noninteractive apt-get "${apt_wait[@]}" install -y -qq "$@" >/dev/null
}
# The dashboard's browser tests drive Debian's chromium (never a downloaded browser build).
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt_install chromium
fi
# The reliability tests shift clocks with libfaketime and cut links with iptables inside a
# network namespace they create (Debian's packages; skipped with a reason when absent).
if { ! command -v faketime >/dev/null 2>&1 || ! command -v iptables >/dev/null 2>&1; } \
        && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt_install faketime iptables
fi
