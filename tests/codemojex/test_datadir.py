"""The data directory: state written whole, the game in flight until marked finished, and
orphans stopped only when the recorded pid really is this directory's server."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from codemojex.domain.errors import ConfigurationError
from codemojex.infra.datadir import DataDir, cmdline
from echomq.servers.server import EmbeddedValkey


@pytest.fixture
def data() -> Iterator[DataDir]:
    with tempfile.TemporaryDirectory(prefix="codemojex-data-") as tmp:
        yield DataDir(Path(tmp) / "data")


def test_state_and_the_game_in_flight(data: DataDir) -> None:
    assert data.load() == {} and data.unfinished() is None
    data.update(game={"run_tag": "a", "finished": False})
    data.update(servers={"valkey": {"pid": 1, "port": 2}})  # merged, not replaced
    assert data.unfinished() == {"run_tag": "a", "finished": False}
    data.update(game={"run_tag": "a", "finished": True})
    assert data.unfinished() is None and data.load()["servers"]["valkey"]["port"] == 2
    assert [p.name for p in data.path.iterdir()] == ["state.json"]  # no temporary file left
    (data.path / "state.json").write_text("[1, 2]")
    with pytest.raises(ConfigurationError, match="not a JSON object"):
        data.load()


def test_an_orphan_is_stopped_only_if_it_is_this_directorys_server(data: DataDir) -> None:
    stranger = subprocess.Popen(["sleep", "60"])
    other = EmbeddedValkey(data_dir=data.path / "elsewhere").start()  # a valkey, not ours
    ours = EmbeddedValkey(data_dir=data.valkey_dir).start()
    try:
        for pid, port in ((stranger.pid, 1), (other.pid, other.port)):
            data.update(servers={"valkey": {"pid": pid, "port": port}})
            assert data.stop_orphans() == []
        assert stranger.poll() is None and other.process is not None and other.process.poll() is None
        data.update(servers={"valkey": {"pid": ours.pid, "port": ours.port}})
        assert data.stop_orphans() == [f"valkey {ours.pid}"]
        assert ours.process is not None and ours.process.wait(5) is not None
        assert cmdline(ours.process.pid) is None
    finally:
        stranger.kill()
        stranger.wait()
        other.stop()
        ours.stop()
