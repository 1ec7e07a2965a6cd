"""Partitions in a network namespace the test creates (``unshare -n``; iptables inside it).

The figures are printed for docs/reliability.md; see partition_child.py for the setup.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.cluster]
ROOT = Path(__file__).resolve().parents[2]


def _netns_available() -> str | None:
    """Why a network namespace with iptables cannot be made here, or None if it can."""
    if shutil.which("unshare") is None or shutil.which("iptables") is None:
        return "unshare or iptables missing (scripts/bootstrap.sh installs iptables as root)"
    probe = subprocess.run(["unshare", "-n", "iptables", "-S", "OUTPUT"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"cannot create a network namespace with iptables: {probe.stderr.strip()[:200]}"
    return None


@pytest.mark.timeout(300)
def test_partitions_of_the_queue_primary(tmp_path: Path) -> None:
    reason = _netns_available()
    if reason:
        pytest.skip(reason)
    proc = subprocess.run(["unshare", "-n", sys.executable, "-m", "tests.reliability.partition_child",
                           str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stderr[-4000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    print(json.dumps(r, indent=1))
    short, long = r["short"], r["long"]
    # Shorter than the node timeout: no failover, the primary kept admitting, nothing lost.
    assert short["replica_promoted_after_s"] is None and short["old_primary_role_after"] == "primary"
    assert short["plain"]["acked_during_cut"] > 0 and short["plain"]["refusals"] == 0
    assert short["plain"]["lost"] == 0 and short["durable"]["lost"] == 0
    # Longer: the minority primary refuses writes after about the node timeout, the
    # majority promotes its replica, the old primary comes back as a replica.
    assert long["replica_promoted_after_s"] is not None and long["old_primary_role_after"] == "replica"
    assert long["plain"]["refused_after_s"] is not None
    assert long["plain"]["refused_after_s"] < long["cut_s"]
    assert "ClusterDown" in long["plain"]["first_refusal"] or "CLUSTERDOWN" in long["plain"]["first_refusal"]
    # What it acknowledged on its own in the meantime is lost (asynchronous replication) ...
    assert long["plain"]["acked_during_cut"] > 0
    assert long["plain"]["lost"] >= long["plain"]["acked_during_cut"] - 1
    # ... but no durable admission it confirmed: it confirmed none it could not replicate.
    assert long["durable"]["lost"] == 0 and long["durable"]["refusals"] > 0
    assert long["durable"]["first_refusal"] == "NotDurable"
    # The zombie on the old primary's side and a consumer on the majority side both held
    # attempt 1 of the same job and both ran the payment; PostgreSQL's unique reference
    # let one through.
    z = long["zombie"]
    assert z["zombie"]["attempt"] == z["majority"]["attempt"] == 1
    assert z["zombie"]["paid"] and z["majority"]["already_paid"] and not z["majority"]["paid"]
    assert z["payments_in_postgres"] == 1 and z["balance"] == 100
    assert r["audit_ok"]
