"""The pure protocol module: one error-code table that agrees with the Lua, builders that
agree with the headers, bounds that refuse before any I/O."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from echomq import (
    EchoMQError,
    InvalidArgument,
    InvalidJobId,
    ProtocolVersionError,
    ScriptContractError,
    ServerBusy,
    ServerError,
    ServerFull,
    generate,
)
from echomq import protocol as p
from echomq.core.model import Lease
from echomq.protocol.scripts import bundle

_CODE = re.compile(r"redis\.error_reply\('([A-Z]+)")


def _lua_sources() -> dict[str, str]:
    root = resources.files("echomq.protocol") / "lua"
    files = [*root.iterdir(), *(root / "include").iterdir()]
    return {f.name: f.read_text() for f in files if f.name.endswith(".lua")}


def test_every_error_code_the_lua_emits_is_in_the_table_and_back() -> None:
    emitted = {code for text in _lua_sources().values() for code in _CODE.findall(text)}
    assert emitted == {"EMQKIND", "EMQARG", "EMQKEYS", "EMQVERSION"}
    assert emitted <= set(p.ERROR_CODES)
    assert {c for c in p.ERROR_CODES if c.startswith("EMQ")} == emitted
    # every script's ERRORS line names only codes of the table
    for script in bundle().values():
        for word in re.findall(r"\bEMQ[A-Z]+\b", script.errors):
            assert word in p.ERROR_CODES, (script.name, word)


@pytest.mark.parametrize(("message", "kind"), [
    ("EMQKIND job id must be JOB-namespaced", InvalidJobId),
    ("EMQARG lease_ms must be an integer in 1..86400000", InvalidArgument),
    ("EMQKEYS one job key per id expected", ScriptContractError),
    ("EMQVERSION queue speaks echomq:4.0.0, client speaks echomq:3.0.0", ProtocolVersionError),
    ("OOM command not allowed when used memory > 'maxmemory'.", ServerFull),
    ("BUSY Redis is busy running a script.", ServerBusy),
    ("WRONGTYPE Operation against a key holding the wrong kind of value", ServerError),
])
def test_error_replies_map_to_typed_exceptions(message: str, kind: type[EchoMQError]) -> None:
    exc = p.error_from_reply(message)
    assert type(exc) is kind and str(exc) == message
    assert p.code_of(exc) == message.split()[0]


def test_argument_errors_are_value_errors_of_echomq() -> None:
    assert issubclass(InvalidArgument, ValueError) and issubclass(InvalidArgument, EchoMQError)
    assert issubclass(ServerFull, ServerError) and issubclass(ServerBusy, ServerError)


@pytest.mark.parametrize("value", [True, 1.5, "3", None, -1, 11])
def test_check_int_refuses_anything_but_an_int_in_range(value: object) -> None:
    with pytest.raises(InvalidArgument):
        p.check_int("x", value, 0, 10)
    assert p.check_int("x", 10, 0, 10) == 10


def test_builders_put_every_argument_where_the_header_names_it() -> None:
    k = p.QueueKeys.of("orders")
    job = generate("JOB")
    lease = Lease(queue="orders", id=job, attempt=3, payload=b"", lane=None, deadline_ms=0)
    call = p.retry(k, lease, delay_ms=5, max_attempts=7, error="boom", mode="fail", token="t1")
    assert call.named() == {
        "active": k.active, "job": k.job(job), "delayed": k.delayed, "dead": k.dead,
        "inflight": k.inflight, "pending": k.pending, "lanes": k.lanes, "meta": k.meta,
        "wake": k.wake, "done": k.done, "finished": k.finished, "expiring": k.expiring,
        "id": job, "attempt": 3,
        "delay_ms": 5, "max_attempts": 7, "error": "boom", "mode": "fail", "token": "t1"}
    claim = p.claim(k, [job.encode()], count=1, lease_ms=100)
    assert claim.named()["jobs"] == [k.job(job)] and claim.named()["ids"] == [job.encode()]
    assert (claim.named()["expired"], claim.named()["expiring"]) == (k.expired, k.expiring)
    admit = p.admit(k, job, b"x", lane="", delay_ms=0, serial=False, max_attempts=None,
                    expires_ms=50)
    assert admit.named()["expires_ms"] == 50 and admit.named()["expiring"] == k.expiring
    assert p.admit(k, job, b"x", lane="", delay_ms=0, serial=False,
                   max_attempts=None).named()["expires_ms"] == ""  # no deadline
    expire = p.expire(k, [job])
    assert expire.named()["jobs"] == [k.job(job)] and expire.named()["expired"] == k.expired
    batch = p.complete_batch(k, [(lease, b"r")], keep_ms=0)
    assert batch.named()["attempts"] == [job, 3, b"r"] and batch.named()["meta"] == k.meta
    assert len(str(batch.named()["token"])) == 16  # a fresh call token (docs/protocol.md)


# Two scripts run only on a retired shard of an online reshard (decision 0032): unload_row
# after import_row (which is fenced) copied the row to the new layout, and rows_exist, a
# read-only look for ids there before an admission. The layout they touch is the one being
# left, so they have no version check of their own.
UNFENCED = {"rows_exist", "unload_row"}


def test_every_script_but_fence_has_the_meta_key_for_its_version_check() -> None:
    for name, script in bundle().items():
        if name in UNFENCED:
            assert "fence(KEYS[" not in script.source, name  # the list is kept current
            continue
        assert "meta" in script.keys, name
        assert "fence(KEYS[" in script.source, name  # the version check runs in every script


def test_bulk_is_the_count_with_what_remains() -> None:
    b = p.Bulk(3, 7)
    assert b == 3 and b + 1 == 4 and b.remaining == 7 and repr(b) == "Bulk(3, remaining=7)"
    assert f"{b}" == str(b) == "3"


def test_lease_bounds_are_documented_where_they_are_checked() -> None:
    doc = p.__doc__ or ""
    for name in ("lease_ms", "delay_ms", "beat_ms", "max_attempts", "keep_ms", "limit"):
        assert f"``{name}``" in doc, name
