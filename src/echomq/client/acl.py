"""Least-privilege Valkey ACL users for EchoMQ: producers, workers and the dashboard.

Each role gets only the commands it sends and the commands its Lua scripts run (the
server checks both against the user), on the keys of its queues (``emq:{<queue>}:*``)
and, for the roles whose scripts publish wake-ups, the queues' shard channels
(``emq:{<queue>}:wake`` and ``emq:{<queue>}:finished``, which results wait on). The
commands inside the scripts are read from the scripts themselves (every
``redis.call('X'``, or ``call('X'`` where a script keeps it in a local), so the rules
cannot drift from the Lua.

==================== =================================================================
role                 may
==================== =================================================================
producer             fence, admit and enqueue (``enqueue``, ``enqueue_many``,
                     ``admit``, ``admit_many``, ``admit_flow``), ``WAIT`` for durable admission,
                     ``result()`` (the row, the finished channel)
worker               everything a consumer and ``echomq worker`` do: claim, heartbeat,
                     complete, retry/defer, promote, reap, retention, its registration,
                     the flow relay and repair (give it the queues of the parents too),
                     the wake channel, the maintenance token (``SET``), ``INFO`` (the
                     eviction-policy and memory checks), ``job()``, progress reports
dashboard            read every queue (``SCAN`` for the queues, stats, pages, job rows,
                     lanes, counts, ``INFO``) and act: requeue, purge and cancel
dashboard-readonly   the dashboard's reads only: every writing script is refused
                     (``NOPERM``) by the server itself
==================== =================================================================

Every role may also ``HELLO``, ``PING``, ``CLIENT SETINFO`` (redis-py's connection
handshake), ``SCRIPT LOAD`` (a script is loaded on ``NOSCRIPT``), ``TIME``, and on a
cluster ``CLUSTER SLOTS``, ``ASKING`` and ``READONLY``. ``EVALSHA`` is allowed only with
the SHA1 of one of the role's own scripts (``+evalsha|<sha>``, a first-argument rule), and
each command inside a script still passes the user's rules. Nothing else: no ``KEYS``,
``FLUSHALL``, ``CONFIG``, ``DEBUG``, ``EVAL`` of arbitrary code, another role's script, or
keys outside the queues. The rules name this version's scripts: after an upgrade that
changes a script, run ``setuser`` again.

    from echomq.client.acl import setuser
    admin.execute_command(*setuser("orders-producer", "s3cret", "producer", queues=["orders"]))
    AsyncConnector.from_url("redis://orders-producer:s3cret@host:6379")
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import cache

from echomq.core.errors import InvalidArgument
from echomq.protocol import keyspace
from echomq.protocol.scripts import bundle

__all__ = ["ROLES", "acl_rules", "script_commands", "setuser"]

# ``redis.call('X'`` and, where a script keeps ``redis.call`` in a local named ``call``
# (claim.lua does, for speed), ``call('X'``: every command a script can run; for a command
# in _BY_SUBCOMMAND only the subcommand named next is granted (``OBJECT ENCODING``: the
# claim's check of the active set's encoding, decision 0054).
_CALL = re.compile(r"\b(?:redis\.)?p?call\(\s*'([A-Za-z]+)'(?:\s*,\s*'([A-Za-z]+)')?")
_BY_SUBCOMMAND = frozenset({"object"})

# Sent by every role: the connection handshake, scripts, the server clock, cluster routing.
_BASE = ("hello", "ping", "client|setinfo", "script|load", "time", "cluster|slots", "asking",
         "readonly")

# Per role: (scripts it runs, plain commands it sends, whether its scripts publish wake-ups).
_PLAN: dict[str, tuple[tuple[str, ...], tuple[str, ...], bool]] = {
    "producer": (("fence", "admit", "enqueue", "enqueue_batch", "row", "trace_attach",  # + flows:
                  "flow_hold", "flow_admit", "flow_start",  # admit_flow (decision 0038)
                  "throttle", "debounce",  # dedupe windows (issue 28 item 2)
                  "reserve"),  # a sharded queue's laned admission (decision 0040); results:
                 ("wait", "ssubscribe", "sunsubscribe"), True),  # the row, the finished channel
    "worker": (("fence", "peek", "claim", "park", "complete", "complete_batch", "heartbeat",
                "heartbeat_batch", "retry", "promote", "reap", "expire", "purge", "worker_beat",
                "stats", "pending_size", "progress",
                "schedule", "admit", "row", "trace_attach",  # admit: a schedule's tick admits its job
                "flow_parent", "flow_child", "flow_start",  # flow relay, repair (decision 0038)
                "reserve"),  # a schedule's tick onto a sharded queue (decision 0040)
               ("zrange", "set", "ssubscribe", "sunsubscribe", "info", "hgetall", "wait", "hscan",
                "zrangebyscore"), True),
    "dashboard": (("fence", "stats", "browse", "info", "pending_size", "peek", "row", "requeue",
                   "purge", "cancel", "pause", "limits"),
                  ("scan", "zrange", "zcount", "zcard", "zscore", "hlen", "hgetall", "info", "role"),
                  True),
    "dashboard-readonly": (("stats", "browse", "info", "pending_size", "peek", "row"),
                           ("scan", "zrange", "zcount", "zcard", "zscore", "hlen", "hgetall", "info",
                            "role"), False),
}
ROLES = tuple(_PLAN)


@cache
def script_commands(name: str) -> frozenset[str]:
    """The commands the script ``name`` (includes expanded) runs, lower case."""
    found = _CALL.findall(bundle()[name].source)
    return frozenset(f"{c.lower()}|{sub.lower()}" if c.lower() in _BY_SUBCOMMAND else c.lower()
                     for c, sub in found)


def acl_rules(role: str, queues: Iterable[str] | None = None) -> list[str]:
    """The ``ACL SETUSER`` rules of ``role``, for ``queues`` (None: every queue)."""
    if role not in _PLAN:
        raise InvalidArgument(f"role must be one of {', '.join(ROLES)}")
    scripts, plain, publishes = _PLAN[role]
    commands = set(_BASE) | set(plain)
    for script in scripts:
        commands |= script_commands(script)
    names = None if queues is None else [keyspace.check_queue(q) for q in queues]
    keys = ["~emq:*"] if names is None else [f"~emq:{{{q}}}:*" for q in names]
    channels: list[str] = []
    if publishes or "ssubscribe" in commands:
        channels = ["&emq:*"] if names is None else [
            f"&emq:{{{q}}}:{c}" for q in names for c in ("wake", "finished")]
    # EVALSHA of this role's scripts only (a first-argument rule per script's SHA1): the
    # commands inside a script are checked too, but since the hand-off an admission runs
    # every command a plain claim does, so only the SHA keeps a producer from claiming.
    shas = sorted(f"+evalsha|{bundle()[s].sha}" for s in scripts)
    return ["reset", "-@all", *(f"+{c}" for c in sorted(commands)), *shas, *keys, *channels]


def setuser(user: str, password: str, role: str, queues: Sequence[str] | None = None) -> list[str]:
    """The whole ``ACL SETUSER`` command (arguments) for ``user`` with ``role``, enabled."""
    if not user or " " in user or not password:
        raise InvalidArgument("a user name without spaces and a non-empty password are required")
    return ["ACL", "SETUSER", user, *acl_rules(role, queues), "on", f">{password}"]
