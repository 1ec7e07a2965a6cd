"""The targeted mutation probes (tests/echomq/mutation_probes.py) hold on the unmutated
server and the 3+3 cluster; scripts/mutation_check.py runs them against each mutant that
names them and expects them to fail."""

from __future__ import annotations

from typing import Any

import pytest

from tests.echomq.mutation_probes import PROBES


@pytest.mark.parametrize("probe", sorted(PROBES))
async def test_probe_holds(conn: Any, qname: str, probe: str) -> None:
    await PROBES[probe](conn, qname)
