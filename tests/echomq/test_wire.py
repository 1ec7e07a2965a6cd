"""The bulk wire's pure core on canned bytes: RESP2 and RESP3 replies, error replies,
partial reads, nested arrays, big bulk strings; request encoding; the target of a client.

No server and no socket: ``echomq.client._wire`` is sans-I/O. The exchange that drives it is
tested on canned streams in ``tests/echomq/_async/test_wire_exchange.py`` (and its
generated blocking copy), and against real servers by the connector tests.
"""

from __future__ import annotations

from typing import Any

import hiredis
import pytest
import redis
import redis.asyncio
from redis import exceptions as rex
from redis.credentials import UsernamePasswordCredentialProvider

from echomq.client._wire import (
    NEED_DATA,
    READ_SIZE,
    ReplyParser,
    Target,
    check_hello,
    pack_command,
    pack_evalsha,
    target_of,
)

SHA = "a" * 40


def parse_all(data: bytes) -> list[Any]:
    parser = ReplyParser()
    parser.feed(data)
    out = []
    while (reply := parser.next()) is not NEED_DATA:
        out.append(reply)
    return out


def test_resp2_replies() -> None:
    assert parse_all(b"+OK\r\n:42\r\n:-7\r\n$5\r\nhello\r\n$0\r\n\r\n$-1\r\n*-1\r\n*0\r\n") == [
        b"OK", 42, -7, b"hello", b"", None, None, []]


def test_bulk_strings_are_binary_safe() -> None:
    assert parse_all(b"$6\r\na\r\nb\x00c\r\n") == [b"a\r\nb\x00c"]


def test_nested_arrays() -> None:
    data = b"*3\r\n:1\r\n*2\r\n$1\r\na\r\n*1\r\n*0\r\n$-1\r\n"
    assert parse_all(data) == [[1, [b"a", [[]]], None]]


def test_error_replies_are_redis_py_exceptions_returned_not_raised() -> None:
    got = parse_all(b"-NOSCRIPT No matching script. Please use EVAL.\r\n"
                    b"-EMQSTALE attempt 2 is not the live one\r\n"
                    b"-ERR unknown command\r\n"
                    b"*2\r\n:1\r\n-EMQKIND inside an array\r\n")
    assert isinstance(got[0], rex.NoScriptError)
    assert type(got[1]) is rex.ResponseError and str(got[1]) == "EMQSTALE attempt 2 is not the live one"
    assert type(got[2]) is rex.ResponseError
    assert got[3][0] == 1 and isinstance(got[3][1], rex.ResponseError)


def test_resp3_replies() -> None:
    got = parse_all(b"%2\r\n+a\r\n:1\r\n+b\r\n#t\r\n"  # map
                    b"~2\r\n:1\r\n:2\r\n"              # set
                    b",3.5\r\n"                        # double
                    b"_\r\n"                           # null
                    b"#f\r\n"                          # false: a reply, not "need data"
                    b"(12345678901234567890\r\n")      # big number
    assert got[0] == {b"a": 1, b"b": True}
    assert sorted(got[1]) == [1, 2]
    assert got[2:5] == [3.5, None, False]
    assert got[5] == b"12345678901234567890"  # hiredis hands a big number over as its digits


def test_false_is_not_mistaken_for_an_incomplete_reply() -> None:
    parser = ReplyParser()
    parser.feed(b"#f\r\n:1\r\n")
    assert parser.next() is False
    assert parser.next() == 1
    assert parser.next() is NEED_DATA


def test_replies_fed_one_byte_at_a_time_come_out_whole_and_in_order() -> None:
    data = b"*2\r\n$3\r\nabc\r\n:5\r\n-EMQKIND no\r\n+OK\r\n"
    parser = ReplyParser()
    out: list[Any] = []
    for i in range(len(data)):
        parser.feed(data[i : i + 1])
        while (reply := parser.next()) is not NEED_DATA:
            out.append((i, reply))
    # each reply appears exactly when its last byte arrives, never earlier
    assert len(data) == 35
    assert [i for i, _ in out] == [16, 29, 34]
    assert out[0][1] == [b"abc", 5]
    assert type(out[1][1]) is rex.ResponseError and str(out[1][1]) == "EMQKIND no"
    assert out[2][1] == b"OK"


def test_a_big_bulk_string_across_many_reads() -> None:
    body = bytes(range(256)) * (3 * READ_SIZE // 256 + 7)  # larger than three reads
    data = b"$%d\r\n%b\r\n:1\r\n" % (len(body), body)
    parser = ReplyParser()
    got: list[Any] = []
    for start in range(0, len(data), READ_SIZE):
        assert got == []  # nothing whole before the last chunk of the string
        parser.feed(data[start : start + READ_SIZE])
        while (reply := parser.next()) is not NEED_DATA:
            got.append(reply)
    assert got == [body, 1]


def test_malformed_bytes_raise_a_protocol_error() -> None:
    parser = ReplyParser()
    parser.feed(b"?not resp\r\n")
    with pytest.raises(hiredis.ProtocolError):
        parser.next()


def test_pack_evalsha_is_the_resp_request() -> None:
    assert pack_evalsha(SHA, ["emq:{q}:pending"], [b"id", 5, "x"]) == (
        b"*7\r\n$7\r\nEVALSHA\r\n$40\r\n" + SHA.encode() + b"\r\n$1\r\n1\r\n"
        b"$15\r\nemq:{q}:pending\r\n$2\r\nid\r\n$1\r\n5\r\n$1\r\nx\r\n")


def test_pack_command_encodes_each_argument_type() -> None:
    assert pack_command("SET", "k", b"\x00\r\n", 12, -3, 1.5, bytearray(b"ba"), memoryview(b"mv")) == (
        b"*8\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\n\x00\r\n\r\n$2\r\n12\r\n$2\r\n-3\r\n$3\r\n1.5\r\n"
        b"$2\r\nba\r\n$2\r\nmv\r\n")
    assert pack_command("É") == b"*1\r\n$2\r\n\xc3\x89\r\n"  # length in bytes, not characters


@pytest.mark.parametrize("bad", [True, None, object(), [1]])
def test_pack_refuses_what_is_not_bytes_str_or_number(bad: object) -> None:
    with pytest.raises(rex.DataError, match="invalid argument of type"):
        pack_command("SET", "k", bad)
    with pytest.raises(rex.DataError):
        pack_evalsha(SHA, [], [bad])


def test_encoded_requests_parse_back_as_arrays_of_bulk_strings() -> None:
    assert parse_all(pack_evalsha(SHA, ["k"], [7]) + pack_command("PING")) == [
        [b"EVALSHA", SHA.encode(), b"1", b"k", b"7"], [b"PING"]]


def test_hello_is_auth_then_select_only_when_needed() -> None:
    plain = Target(host="h", port=1, path=None, username=None, password=None, db=0, timeout=None)
    assert plain.hello() == []
    full = Target(host="h", port=1, path=None, username="u", password="p", db=2, timeout=None)
    assert full.hello() == [pack_command("AUTH", "u", "p"), pack_command("SELECT", 2)]
    legacy = Target(host="h", port=1, path=None, username=None, password="p", db=0, timeout=None)
    assert legacy.hello() == [pack_command("AUTH", "p")]


def test_check_hello_raises_on_a_refusal() -> None:
    check_hello([b"OK", b"OK"])
    with pytest.raises(rex.AuthenticationError, match="WRONGPASS"):
        check_hello([b"OK", rex.ResponseError("WRONGPASS invalid username-password pair")])


def test_target_of_plain_tcp_and_unix_clients() -> None:
    for client in (redis.Redis.from_url("redis://u:p@127.0.0.1:7001/3", socket_timeout=2.0),
                   redis.asyncio.Redis.from_url("redis://u:p@127.0.0.1:7001/3", socket_timeout=2.0)):
        assert target_of(client) == Target(host="127.0.0.1", port=7001, path=None, username="u",
                                           password="p", db=3, timeout=2.0)
    unix = target_of(redis.Redis.from_url("unix:///tmp/v.sock?db=1"))
    assert unix is not None and unix.path == "/tmp/v.sock" and unix.host is None and unix.db == 1


def test_tls_and_credential_providers_fall_back_to_redis_py() -> None:
    assert target_of(redis.Redis.from_url("rediss://127.0.0.1:7001")) is None
    assert target_of(redis.asyncio.Redis.from_url("rediss://127.0.0.1:7001")) is None
    provider = UsernamePasswordCredentialProvider("u", "p")
    assert target_of(redis.Redis(host="127.0.0.1", credential_provider=provider)) is None
    assert target_of(redis.asyncio.Redis(host="127.0.0.1", credential_provider=provider)) is None
    assert target_of(object()) is None


# --- calls.Enqueuer: enqueue.lua's request encoded once per queue (issue 15, bulk client CPU) ---


@pytest.mark.parametrize("name", ["q", "orders 100%", "%d%b%s", "émoji 🎲", "a" * 128])
@pytest.mark.parametrize("payload", [b"", b"x" * 64, b"%b\r\n$3\r\n", bytes(range(256)) * 40])
def test_enqueuer_bytes_are_the_generic_encoding_of_enqueue(name: str, payload: bytes) -> None:
    from echomq import protocol as p
    from echomq.core import ids

    k = p.QueueKeys.of(name)
    job_id = ids.generate("JOB")
    call = p.Enqueuer(k)(job_id, payload)
    plain = p.enqueue(k, job_id, payload, token=str(call.args[2]))
    assert (call.script, list(call.keys), list(call.args)) == (plain.script, plain.keys, plain.args)
    assert call.wire == pack_evalsha(plain.script.sha, plain.keys, plain.args)
    assert plain.wire is None
    assert call.wire is not None
    words = [x.encode() if isinstance(x, str) else x for x in (*plain.keys, *plain.args)]
    assert parse_all(call.wire) == [[b"EVALSHA", plain.script.sha.encode(),
                                     str(len(plain.keys)).encode(), *words]]
    assert len(plain.keys) == 7  # job, pending, wake, meta, parked, active, rate (the claim gate)


@pytest.mark.parametrize("bad", ["JOB", "JOB" + "0" * 27, "JOB{q}0000000000000000000000", "job01" + "0" * 24,
                                 None, 7, b"JOB01M8T3B1XCE6F7Z9QQDSXE84BR",
                                 "JOB01M8T3B1XCE6F7Z9QQDSXE84BR\n"])
def test_enqueuer_refuses_what_enqueue_refuses(bad: object) -> None:
    from echomq import protocol as p
    from echomq.core.errors import InvalidJobId

    k = p.QueueKeys.of("q")
    with pytest.raises(InvalidJobId) as plain:
        p.enqueue(k, bad, b"x")  # type: ignore[arg-type]
    with pytest.raises(InvalidJobId) as fast:
        p.Enqueuer(k)(bad, b"x")  # type: ignore[arg-type]
    assert str(fast.value) == str(plain.value)


# --- encoded.BatchEnqueuer: enqueue_batch.lua's request in a few joins (decision 0027) ---


@pytest.mark.parametrize("name", ["q", "orders 100%", "%d%b%s", "émoji 🎲", "a" * 128])
@pytest.mark.parametrize("payloads", [[b""], [b"x" * 64] * 3, [b"%b\r\n$3\r\n", b"", b"y" * 300],
                                      [bytes(range(256)) * 40, b"\r\n"]])
def test_batch_enqueuer_bytes_are_the_generic_encoding_of_enqueue_batch(
        name: str, payloads: list[bytes]) -> None:
    from echomq import protocol as p
    from echomq.core import ids

    k = p.QueueKeys.of(name)
    job_ids = ids.generate_many("JOB", len(payloads))
    assert p.BatchEnqueuer.valid_ids(job_ids)
    call = p.BatchEnqueuer(k).build(job_ids, payloads)
    plain = p.enqueue_batch(k, job_ids, payloads, token=str(call.args[0]))
    assert (call.script, list(call.keys), list(call.args)) == (plain.script, plain.keys, plain.args)
    assert call.keys[0] == k.pending and call.keys[6:] == [k.job(i) for i in job_ids]
    assert len(call.keys) == 6 + len(job_ids)
    assert call.wire is None and call.encode is not None  # encoded when the wire sends it
    request = call.request()
    assert request == pack_evalsha(plain.script.sha, plain.keys, plain.args)
    words = [x.encode() if isinstance(x, str) else x for x in (*plain.keys, *plain.args)]
    assert parse_all(request) == [[b"EVALSHA", plain.script.sha.encode(),
                                   str(len(plain.keys)).encode(), *words]]


@pytest.mark.parametrize("bad", ["JOB", "JOB" + "0" * 27, "ORD01M8T3B1XCE6F7Z9QQDSXE84BR",
                                 "JOB81M8T3B1XCE6F7Z9QQDSXE84BR", "job01M8T3B1XCE6F7Z9QQDSXE84BR",
                                 "JOB01M8T3B1XCE6F7Z9QQDSXE84B\n", "JOB01M8T3B1XCE6F7Z9QQDSXE84BR\n",
                                 None, 7, b"JOB01M8T3B1XCE6F7Z9QQDSXE84BR"])
def test_batch_ids_are_refused_unless_every_one_is_a_valid_job_id(bad: object) -> None:
    from echomq import protocol as p
    from echomq.core import ids
    from echomq.core.errors import InvalidJobId

    good = ids.generate_many("JOB", 3)
    assert p.BatchEnqueuer.valid_ids(good) and p.BatchEnqueuer.valid_ids([])
    for at in range(4):
        assert not p.BatchEnqueuer.valid_ids([*good[:at], bad, *good[at:]])  # type: ignore[list-item]
    if not (isinstance(bad, str) and bad.startswith("ORD")):  # another kind: the server's EMQKIND
        with pytest.raises(InvalidJobId):
            p.enqueue_batch(p.QueueKeys.of("q"), [bad], [b"x"])  # type: ignore[list-item]


def test_batch_size_keeps_four_calls_for_a_short_run_and_caps_a_long_one() -> None:
    from echomq import protocol as p

    assert [p.batch_size(n) for n in (1, 100, 1000, 2000, 50_000)] == [32, 32, 250, 256, 256]
    assert p.batch_size(50_000, most=100) == 100 and p.batch_size(5, most=1) == 1


def test_pack_evalsha_encodes_every_argument_type_as_pack_command_does() -> None:
    class Name(str):
        pass

    class Big(int):
        pass

    keys = ["emq:{q}:job:É", Name("k2"), b"raw\r\nkey"]
    args = [0, -7, Big(12), "x", b"", bytearray(b"ba"), memoryview(b"mv"), 1.5, "É"]
    assert pack_evalsha(SHA, keys, args) == pack_command("EVALSHA", SHA, 3, *keys, *args)
    assert parse_all(pack_evalsha(SHA, keys, args)) == [
        [b"EVALSHA", SHA.encode(), b"3", "emq:{q}:job:É".encode(), b"k2", b"raw\r\nkey", b"0",
         b"-7", b"12", b"x", b"", b"ba", b"mv", b"1.5", "É".encode()]]
