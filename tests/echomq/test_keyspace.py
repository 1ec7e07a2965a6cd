from __future__ import annotations

import pytest

from echomq import InvalidJobId, InvalidQueueName, generate, job_key, queue_key, slot
from echomq.protocol.keyspace import MAX_QUEUE_NAME, check_queue, hash_tag


def test_seed_slot_vector() -> None:
    assert slot("123456789") == 12739


@pytest.mark.parametrize("type_", ["pending", "job:JOB0000000000000000000000000", "active", "meta"])
def test_every_orders_key_is_slot_105(type_: str) -> None:
    assert slot(f"emq:{{orders}}:{type_}") == 105


def test_queue_key_braces_the_name() -> None:
    assert queue_key("cm", "pending") == "emq:{cm}:pending"


def test_job_key_and_pending_share_a_slot() -> None:
    jid = generate("JOB")
    assert job_key("cm", jid) == f"emq:{{cm}}:job:{jid}"
    assert slot(job_key("cm", jid)) == slot(queue_key("cm", "pending"))


def test_hash_tag_rules() -> None:
    assert hash_tag("a{b}c") == b"b"
    assert hash_tag("a{}c{d}") == b"a{}c{d}"  # empty first tag: the whole key is hashed
    assert hash_tag("nobraces") == b"nobraces"
    assert hash_tag("a{b") == b"a{b"


@pytest.mark.parametrize(
    "name",
    ["", "}", "}x", "{x", "a{b}c", "a}b", "tab\there", "nl\n", "nul\x00", "\x7f", " lead",
     "trail ", "x" * (MAX_QUEUE_NAME + 1)],
)
def test_bad_queue_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidQueueName):
        check_queue(name)
    with pytest.raises(InvalidQueueName):
        queue_key(name, "pending")


@pytest.mark.parametrize("name", ["cm", "cm-settle", "cm.notify", "orders", "émoji🎲", "a b"])
def test_good_queue_names_keep_their_tag(name: str) -> None:
    assert hash_tag(queue_key(name, "pending")) == name.encode()


@pytest.mark.parametrize(
    "bad", ["", "JOB", "job01", "JOB{x}", "JOB:1", "JOB\x00" + "0" * 25, "x" * 29, "JOB🎲",
            "JOB" + "0" * 25 + "\n", "JOB" + "8" + "0" * 25, None, 123]
)
def test_job_key_refuses_non_branded_ids(bad: object) -> None:
    with pytest.raises(InvalidJobId):
        job_key("cm", bad)  # type: ignore[arg-type]
