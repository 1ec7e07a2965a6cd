"""The keyspace checks every scenario ends with."""

from __future__ import annotations

import redis

STATES = ("pending", "active", "delayed", "done", "dead", "expired")


def assert_consistent(raw: redis.Redis, queue: str) -> dict[str, str]:
    """Every job id is in exactly one state set, every row has its state entry, and the
    set it is in names the row's state (the done set also holds ``cancelled`` rows,
    decision 0023; a sharded queue's reservation row is in none, decision 0040). Returns id
    -> the set it is in."""
    where: dict[str, str] = {}
    for state in STATES:
        for member in raw.zrange(f"emq:{{{queue}}}:{state}", 0, -1):
            jid = member.decode()
            assert jid not in where, f"{jid} in both {where[jid]} and {state}"
            where[jid] = state
    rows = {
        k.decode().rsplit(":", 1)[1]
        for k in raw.scan_iter(match=f"emq:{{{queue}}}:job:*", count=1000)
    }
    # A sharded queue's reservation (decision 0040) is a row in no set, naming another shard.
    rows -= {jid for jid in rows - set(where)
             if raw.hget(f"emq:{{{queue}}}:job:{jid}", "state") == b"reserved"}
    assert rows == set(where), (rows - set(where), set(where) - rows)
    for jid, state in where.items():
        row_state = raw.hget(f"emq:{{{queue}}}:job:{jid}", "state")
        assert row_state == state.encode() or (state, row_state) == ("done", b"cancelled"), jid
    # Expiry (decision 0045): every waiting job with a deadline is on the expiring index at
    # its deadline, so the reaper finds it; the index may hold stale entries of jobs that
    # no longer wait (the reaper drops them), never a wrong deadline.
    indexed = {m.decode(): s for m, s in raw.zrange(f"emq:{{{queue}}}:expiring", 0, -1, withscores=True)}
    for jid, state in where.items():
        exp = raw.hget(f"emq:{{{queue}}}:job:{jid}", "exp")
        if exp is not None and state in ("pending", "delayed"):
            assert indexed.get(jid) == float(exp), (jid, "waits with a deadline, not indexed")
        if jid in indexed:
            assert exp is not None and indexed[jid] == float(exp), (jid, "indexed, wrong deadline")
    return where
