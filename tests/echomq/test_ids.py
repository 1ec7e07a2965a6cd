from __future__ import annotations

import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from echomq.core import ids


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


# --- cheap minting (issue 15 item 2): the fast path, the batch form, threads and fork ---

FROZEN_NS = 1_790_000_000_123_456_789  # a fixed clock: every id of a test in one millisecond


def frozen_minter(*draws: int) -> tuple[Callable[[str], str], Callable[[str, int], list[str]]]:
    """A private minter on a still clock; its random draws are ``draws``, then real ones."""
    queued = list(draws)

    def draw(bits: int) -> int:
        return queued.pop(0) if queued else secrets.randbits(bits)

    gen, many, _ = ids._minter(clock=lambda: FROZEN_NS, randbits=draw)
    return gen, many


def test_one_millisecond_spans_many_blocks_in_order() -> None:
    gen, _ = frozen_minter()
    batch = [gen("JOB") for _ in range(5000)]  # > 4 blocks of 1,024 low values
    assert batch == sorted(batch) and len(set(batch)) == 5000
    assert {ids.timestamp_ms(b) for b in batch} == {FROZEN_NS // 1_000_000}
    assert all(ids.valid(b) for b in batch)


def test_past_eighty_bits_the_next_millisecond_takes_over() -> None:
    gen, many = frozen_minter((1 << 80) - 3)  # the highest tail: 3 values left
    batch = [gen("JOB") for _ in range(5)] + many("JOB", 3) + [gen("JOB")]
    assert batch == sorted(batch) and len(set(batch)) == len(batch)
    ms = FROZEN_NS // 1_000_000
    assert [ids.timestamp_ms(b) for b in batch[:3]] == [ms] * 3
    assert {ids.timestamp_ms(b) for b in batch[3:]} == {ms + 1}
    assert all(ids.valid(b) for b in batch)


def test_clock_stepping_back_keeps_order() -> None:
    now = [FROZEN_NS]
    gen, many, _ = ids._minter(clock=lambda: now[0])
    first = [gen("JOB") for _ in range(10)]
    now[0] -= 5_000_000_000  # five seconds back
    later = [gen("JOB") for _ in range(10)] + many("JOB", 10) + [gen("JOB")]
    assert first + later == sorted(first + later) and len(set(first + later)) == 31


def test_generate_many_shapes_and_order() -> None:
    before = time.time_ns() // 1_000_000
    a = ids.generate("JOB")
    batch = ids.generate_many("JOB", 3000)
    b = ids.generate("JOB")
    small = ids.generate_many("ORD", 1)
    after = time.time_ns() // 1_000_000
    assert len(batch) == 3000 and len(set(batch)) == 3000
    assert [a, *batch, b] == sorted([a, *batch, b])
    assert all(ids.valid(x) and ids.kind_of(x) == "JOB" and len(x) == 29 for x in batch)
    assert all(before <= ids.timestamp_ms(x) <= after for x in [a, *batch, b])
    assert len(small) == 1 and ids.kind_of(small[0]) == "ORD"
    assert ids.generate_many("JOB", 0) == []
    exact = ids.generate_many("JOB", 1024)  # exactly one block, then the next id after it
    nxt = ids.generate("JOB")
    assert exact == sorted(exact) and exact[-1] < nxt


@pytest.mark.parametrize("n", [-1, 1.5, "3", None, True])
def test_generate_many_refuses_a_bad_count(n: object) -> None:
    with pytest.raises(ValueError, match="count"):
        ids.generate_many("JOB", n)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["job", "JOBS", "", None, 7, ["JOB"], b"JOB"])
def test_bad_kinds_are_refused_by_both_forms(kind: object) -> None:
    with pytest.raises(ValueError, match="three uppercase"):
        ids.generate(kind)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="three uppercase"):
        ids.generate_many(kind, 2)  # type: ignore[arg-type]


def test_many_ids_are_all_valid() -> None:
    minted = [ids.generate(k) for k in ("JOB", "ORD", "ZZZ", "AAA") for _ in range(5000)]
    minted += ids.generate_many("JOB", 50_000)
    assert all(ids.valid(x) for x in minted)
    assert len(set(minted)) == len(minted)


def test_threads_mint_unique_ids_each_in_order() -> None:
    out: list[list[str]] = [[] for _ in range(8)]
    start = threading.Barrier(8)

    def work(i: int) -> None:
        start.wait()
        for r in range(200):
            if r % 10 == 0:
                out[i] += ids.generate_many("JOB", 50)
            else:
                out[i].append(ids.generate("JOB"))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    for seq in out:
        assert seq == sorted(seq) and len(seq) == 180 + 20 * 50
    everything = [x for seq in out for x in seq]
    assert len(set(everything)) == len(everything)


FORK_SCRIPT = """
import os, sys, time
if sys.argv[1] == "frozen":  # hold the clock still: only the reseed after fork keeps children apart
    time.time_ns = lambda: 1_790_000_000_123_456_789
from echomq.core import ids
ids.generate("JOB"); ids.generate_many("JOB", 10)  # the parent has a sequence under way
children = []
for _ in range(4):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        minted = [ids.generate("JOB") for _ in range(2000)] + ids.generate_many("JOB", 2000)
        os.write(w, "\\n".join(minted).encode() + b"\\n")
        os._exit(0)
    os.close(w)
    children.append((pid, r))
mine = [ids.generate("JOB") for _ in range(2000)] + ids.generate_many("JOB", 2000)
sys.stdout.write("\\n".join(mine) + "\\n")
for pid, r in children:
    with os.fdopen(r, "rb") as f:
        sys.stdout.write(f.read().decode())
    assert os.waitpid(pid, 0)[1] == 0
"""


@pytest.mark.parametrize("clock", ["frozen", "real"])
def test_unique_across_forked_processes(clock: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", FORK_SCRIPT, clock], capture_output=True, text=True, timeout=120, check=True
    )
    seen = done.stdout.split()
    assert len(seen) == 5 * 4000 and len(set(seen)) == len(seen)
    assert all(ids.valid(x) for x in seen)


def test_interleaved_kinds_each_sort_and_never_repeat() -> None:
    gen, many = frozen_minter()
    minted: dict[str, list[str]] = {"JOB": [], "ORD": [], "ZZZ": []}
    for i in range(6000):  # several blocks of 1,024 in one millisecond, kinds interleaved
        kind = ("JOB", "ORD", "JOB", "ZZZ")[i % 4]
        minted[kind].append(gen(kind))
        if i % 1500 == 0:
            minted["ORD"] += many("ORD", 700)
    for kind, seq in minted.items():
        assert seq == sorted(seq) and len(set(seq)) == len(seq)
        assert all(ids.valid(x) and ids.kind_of(x) == kind for x in seq)


def test_a_str_subclass_kind_mints_like_its_value() -> None:
    class Kind(str):
        pass

    gen, _ = frozen_minter()
    seq = [gen("JOB"), gen(Kind("JOB")), gen("JOB"), gen(Kind("JOB"))]
    assert seq == sorted(seq) and len(set(seq)) == 4
    assert all(type(x) is str and ids.kind_of(x) == "JOB" for x in seq)
