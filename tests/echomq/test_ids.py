from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from echomq import ids


def test_shape() -> None:
    jid = ids.generate("JOB")
    assert len(jid) == 29 and jid.startswith("JOB") and ids.valid(jid)
    assert not set(jid) & set("{}:")
    assert ids.kind_of(jid) == "JOB"


@pytest.mark.parametrize("kind", ["job", "JO", "JOBS", "J0B", "", "ÉTÉ"])
def test_bad_kinds_are_refused(kind: str) -> None:
    with pytest.raises(ValueError, match="three uppercase"):
        ids.generate(kind)


def test_ids_sort_by_creation_within_one_millisecond() -> None:
    batch = [ids.generate("JOB") for _ in range(20_000)]  # many share a millisecond
    assert batch == sorted(batch)
    assert len(set(batch)) == len(batch)
    assert len({ids.timestamp_ms(b) for b in batch}) < len(batch)


def test_timestamp_is_the_minting_millisecond() -> None:
    import time

    before = time.time_ns() // 1_000_000
    jid = ids.generate("ORD")
    after = time.time_ns() // 1_000_000
    assert before <= ids.timestamp_ms(jid) <= after


def test_unique_across_processes() -> None:
    code = "from echomq import ids; print('\\n'.join(ids.generate('JOB') for _ in range(5000)))"
    outs = [
        subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    seen: list[str] = []
    for p in outs:
        out, _ = p.communicate(timeout=60)
        seen += out.split()
    assert len(seen) == 20_000 and len(set(seen)) == 20_000


@given(st.text(max_size=40))
def test_valid_accepts_only_the_branded_shape(text: str) -> None:
    if ids.valid(text):
        assert len(text) == 29 and text[:3].isupper() and text.isascii() and text.isalnum()
        assert not set(text) & set("{}:\n\x00")
