"""A resume finishes the run in flight where it ran (issue 25, item 4): the state file records
the servers a run used; a resume against other servers is refused in one line that says which,
before any server starts; options given to a resume that differ from the game's are named."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from codemojex.domain.errors import ConfigurationError
from codemojex.game.report import delivered_score_notes
from codemojex.infra.datadir import DataDir
from codemojex.infra.resume import check_same_servers, differences, redacted, servers_in_use
from codemojex.service import Admitted, Services, submit
from codemojex.service.codec import decode_note, note_id
from codemojex.workers import ConsoleDelivery, NotifyWorker, ScoreWorker
from echomq import Ack
from tests.codemojex.game import PRICE, make_player, make_round

ROOT = Path(__file__).resolve().parents[2]
CODEMOJEX = str(Path(sys.executable).with_name("codemojex"))


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="codemojex-resume-") as tmp:
        yield Path(tmp)


def test_urls_are_recorded_without_their_password() -> None:
    assert redacted("postgresql://game:s3cret@db.local:5432/cm") == "postgresql://game@db.local:5432/cm"
    assert redacted("redis+cluster://:pw@h1:7000,h2:7001") == "redis+cluster://h1:7000,h2:7001"
    assert redacted("host=/tmp port=5433 password=x user=u") == "host=/tmp port=5433 user=u"
    assert servers_in_use(cluster=True, env={}) == {"valkey": "embedded cluster", "postgres": "embedded"}
    assert servers_in_use(cluster=False, env={"ECHOMQ_URL": "redis://127.0.0.1:6390",
                                              "CODEMOJEX_DATABASE_URL": "postgresql://u:p@h/d"}) == {
        "valkey": "redis://127.0.0.1:6390", "postgres": "postgresql://u@h/d"}


def test_a_resume_on_other_servers_is_refused_naming_both() -> None:
    ran = {"valkey": "embedded", "postgres": "postgresql://u@db/cm"}
    check_same_servers(ran, dict(ran))  # the same: fine
    check_same_servers(None, ran)  # a state from before servers were recorded: not checked
    with pytest.raises(ConfigurationError) as caught:
        check_same_servers(ran, {"valkey": "embedded", "postgres": "embedded"})
    text = str(caught.value)
    assert "\n" not in text and "PostgreSQL postgresql://u@db/cm" in text and "PostgreSQL embedded" in text
    assert "Valkey" not in text  # only what differs is named


def test_options_that_differ_from_the_game_in_flight_are_named() -> None:
    game = {"options": {"players": 20, "guesses": 2, "rounds": 3, "round_s": 6.0, "price": 10}}
    notes = differences({"players": 50, "guesses": 2, "round_seconds": 3.0, "score_shards": 2}, game,
                        {"score_shards": 0})
    assert notes == ["--players 50 given, the game has 20", "--round-seconds 3.0 given, the game has 6.0",
                     "--score-shards 2 given, the game has 0"]


def test_play_refuses_to_resume_against_another_database_in_one_line(tmp_path: Path) -> None:
    """The issue's trap: a run on CODEMOJEX_DATABASE_URL resumed on the embedded database (or
    the other way round) timed out on rounds that do not exist there, every time."""
    data = DataDir(tmp_path / "data")
    data.update(topology={"cluster": False, "score_shards": 0}, game={"finished": False},
                where={"valkey": "embedded", "postgres": "embedded"})
    env = {k: v for k, v in os.environ.items() if k != "ECHOMQ_URL"}
    env["CODEMOJEX_DATABASE_URL"] = "postgresql://game:s3cret@127.0.0.1:1/cm"
    out = subprocess.run([CODEMOJEX, "play", "--data", str(data.path)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=60)
    lines = [line for line in (out.stdout + out.stderr).splitlines() if line.strip()]
    assert out.returncode == 2 and len(lines) == 1, out
    assert "ran on PostgreSQL embedded" in lines[0] and "postgresql://game@127.0.0.1:1/cm" in lines[0]
    assert "s3cret" not in lines[0] and "Traceback" not in lines[0]
    assert "servers" not in data.load()  # refused before any server started


async def test_the_audit_counts_delivered_score_notes_in_postgresql_not_in_expiring_rows(
        services: Services) -> None:
    """A resume more than an hour after a crash found the queue's done rows expired and failed
    its own audit; the count now comes from the guess's ``notified_at`` stamp."""
    player = await make_player(services.pool, PRICE)
    rid = await make_round(services.pool)
    out = await submit(services, rid, player, ("😀", "😎", "🤖", "👻", "🐱", "🐶"))
    assert isinstance(out, Admitted)
    (lease,) = await services.scores.claim(1, lease_ms=10_000)
    assert isinstance(await ScoreWorker(services, note_delay_ms=0).handle(lease), Ack)
    (note,) = await services.notifications.claim(1, lease_ms=10_000)
    assert decode_note(note.payload).round_id == rid and note.id == note_id(out.job_id)
    assert await delivered_score_notes(services, [rid]) == 0
    assert isinstance(await NotifyWorker(ConsoleDelivery(write=None), pool=services.pool).handle(note), Ack)
    assert await delivered_score_notes(services, [rid]) == 1
    expired = Services(services.pool, services.connector, suffix=services.suffix + "-expired")
    assert await expired.notifications.job(note_id(out.job_id)) is None  # no done row to count
    assert await delivered_score_notes(expired, [rid]) == 1
