"""Business-key ids: ``derive_id`` maps a key to the same valid id every time, so
admitting the same business key twice is refused as a duplicate (on both backends)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

import echomq
from echomq import AsyncQueue, Connector, InvalidArgument, Queue, Verdict, derive_id
from echomq.core import ids

# Fixed vectors: the ids the game minted before the helper moved into echomq (a change
# here would re-admit every in-flight derived job of a running game as a new job).
VECTORS = [
    (("JOB", "123:456", "tg-update"), "JOB000000000057HY8TKFN376YVC4"),
    (("JOB", "JOB01JH3Q8Z6N4Y2T9X0B5C7D8E9F", "guess"), "JOB01JH3Q8Z6N3PZJHCC20Z3X3W40"),
    (("RND", "SER01JH3Q8Z6N4Y2T9X0B5C7D8E9F", "round:3"), "RND01JH3Q8Z6NGE767Y981YCRVGT5"),
]


@pytest.mark.parametrize(("args", "want"), VECTORS)
def test_fixed_vectors(args: tuple[str, str, str], want: str) -> None:
    kind, key, namespace = args
    assert derive_id(kind, key, namespace=namespace) == want


def test_the_game_calls_the_queue_helper() -> None:
    from codemojex.service.codec import derive_id as game_derive

    for (kind, key, namespace), want in VECTORS:
        assert game_derive(kind, namespace, key) == want


def test_facade_exports_it() -> None:
    assert echomq.derive_id is ids.derive_id and "derive_id" in echomq.__all__


@given(st.text(min_size=1, max_size=200), st.text(max_size=20), st.sampled_from(["JOB", "RND", "ABC"]))
def test_same_key_same_valid_id_of_its_kind(key: str, namespace: str, kind: str) -> None:
    a = derive_id(kind, key, namespace=namespace)
    assert a == derive_id(kind, key, namespace=namespace)
    assert ids.valid(a) and ids.kind_of(a) == kind


def test_the_same_id_in_another_process() -> None:
    code = "import echomq; print(echomq.derive_id('JOB', 'order-42'))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == derive_id("JOB", "order-42")


def test_keys_namespaces_and_kinds_separate() -> None:
    base = derive_id("JOB", "order-42")
    assert derive_id("JOB", "order-43") != base
    assert derive_id("JOB", "order-42", namespace="invoice") != base
    assert derive_id("RND", "order-42")[3:] == base[3:]  # the kind is the only difference
    # the namespace is not a key prefix: a NUL byte separates the two in the hash
    assert derive_id("JOB", "b", namespace="a") != derive_id("JOB", "ab")


def test_time_part() -> None:
    assert ids.timestamp_ms(derive_id("JOB", "order-42")) == 0
    assert ids.timestamp_ms(derive_id("JOB", "order-42", at_ms=1_700_000_000_123)) == 1_700_000_000_123
    src = ids.generate("JOB")
    assert ids.timestamp_ms(derive_id("JOB", src, namespace="n")) == ids.timestamp_ms(src)
    # ids derived at later ticks sort later
    assert derive_id("JOB", "x", at_ms=2000) > derive_id("JOB", "y", at_ms=1999)


@pytest.mark.parametrize(("kind", "key", "kw"), [
    ("job", "k", {}), ("JOBS", "k", {}), (None, "k", {}),
    ("JOB", "", {}), ("JOB", b"k", {}), ("JOB", 42, {}), ("JOB", "k" * 4097, {}),
    ("JOB", "k", {"namespace": None}), ("JOB", "k", {"at_ms": -1}), ("JOB", "k", {"at_ms": 1 << 48}),
    ("JOB", "k", {"at_ms": 1.5}), ("JOB", "k", {"at_ms": True}),
])
def test_bad_input_is_a_typed_error(kind: object, key: object, kw: dict[str, object]) -> None:
    with pytest.raises(InvalidArgument):
        derive_id(kind, key, **kw)  # type: ignore[arg-type]


async def test_admitting_a_business_key_twice_is_a_duplicate(queue: AsyncQueue) -> None:
    jid = derive_id("JOB", "order-42")
    assert await queue.admit(jid, b"first") is Verdict.ENQUEUED
    assert await queue.admit(derive_id("JOB", "order-42"), b"second") is Verdict.DUPLICATE
    row = await queue.job(jid)
    assert row is not None and row["payload"] == b"first"


def test_admitting_a_business_key_twice_is_a_duplicate_blocking(sync_conn: Connector, qname: str) -> None:
    q = Queue(sync_conn, qname)
    pairs = [(derive_id("JOB", f"order-{n % 3}"), b"p") for n in range(6)]
    verdicts = q.enqueue_many(pairs)
    assert verdicts == [Verdict.ENQUEUED] * 3 + [Verdict.DUPLICATE] * 3
    assert q.stats().pending == 3
