"""The game on a sharded scoring queue: ``codemojex play --cluster`` starts a local 3+3
cluster and spreads ``cm`` over 3 shards, one per primary (a player is a lane, so a
player's guesses stay in order in one shard); the audit is clean."""

from __future__ import annotations

import pytest

from tests.codemojex.test_play_cli import CODEMOJEX, _run, tmp_path  # noqa: F401 (fixture)

pytestmark = [pytest.mark.slow, pytest.mark.cluster, pytest.mark.timeout(600)]


async def test_play_on_the_cluster_with_cm_sharded(tmp_path) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    code, out = await _run(CODEMOJEX, "play", "--cluster", "--players", "9", "--guesses", "2",
                           "--rounds", "2", "--round-seconds", "3", "--data", str(tmp_path / "data"),
                           timeout_s=420)
    assert code == 0, out[-3000:]
    assert "scoring queue cm: 3 shards" in out
    assert "AUDIT CLEAN" in out and "unsettled rounds 0" in out, out[-3000:]
