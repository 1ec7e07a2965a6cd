"""The public facade: everything in __all__ exists, nothing connects at import."""

from __future__ import annotations

import subprocess
import sys

import echomq


def test_all_names_exist_once() -> None:
    assert len(set(echomq.__all__)) == len(echomq.__all__)
    for name in echomq.__all__:
        assert getattr(echomq, name) is not None, name


def test_errors_share_one_root() -> None:
    for name in echomq.__all__:
        obj = getattr(echomq, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, echomq.EchoMQError), name


def test_import_has_no_side_effects() -> None:
    code = ("import socket, echomq, echomq.consumer, echomq.supervisor, echomq.cli\n"
            "assert not [o for o in __import__('gc').get_objects() "
            "if isinstance(o, socket.socket)]")
    subprocess.run([sys.executable, "-c", code], check=True, env={"ECHOMQ_URL": "redis://127.0.0.1:1"})


def test_blocking_api_is_generated_from_async() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, str(root / "scripts" / "unasync_gen.py"), "--check"], check=True)


def test_id_minting_is_exported() -> None:
    from echomq import ids

    assert echomq.generate is ids.generate and echomq.generate_many is ids.generate_many
    assert [echomq.valid(x) for x in echomq.generate_many("JOB", 3)] == [True] * 3


def test_producer_is_exported() -> None:
    from echomq import producer

    assert echomq.Producer is producer.Producer and issubclass(echomq.ProducerClosed, echomq.EchoMQError)
