"""One error type per kind of misuse: a bad argument anywhere in EchoMQ is an
:class:`~echomq.InvalidArgument` (a ``ValueError`` of EchoMQ's tree, so callers that
caught ``ValueError`` still do), a bad id an :class:`~echomq.InvalidJobId`; never a bare
``ValueError`` from one module and EchoMQ's own type from the next."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import echomq
from echomq import InvalidArgument, InvalidJobId
from echomq.client.acl import acl_rules
from echomq.client.registry import Registration
from echomq.core import ids
from echomq.runtime.supervisor import Supervisor
from echomq.servers.local_cluster import LocalCluster

SRC = Path(echomq.__file__).parent

MISUSES: list[tuple[str, Callable[[], Any], type[Exception]]] = [
    ("an id kind (generate)", lambda: ids.generate("job"), InvalidArgument),
    ("an id kind (derive_id)", lambda: ids.derive_id("job", "k"), InvalidArgument),
    ("a negative count", lambda: ids.generate_many("JOB", -1), InvalidArgument),
    ("not an id (kind_of)", lambda: ids.kind_of("nope"), InvalidJobId),
    ("not an id (timestamp_ms)", lambda: ids.timestamp_ms("nope"), InvalidJobId),
    ("a supervisor strategy", lambda: Supervisor([], strategy="all"), InvalidArgument),  # type: ignore[arg-type]
    ("an ACL role", lambda: acl_rules("root"), InvalidArgument),
    ("a registry ttl", lambda: Registration(None, ["q"], beat_s=5, ttl_s=1), InvalidArgument),  # type: ignore[arg-type]
    ("a cluster shape", lambda: LocalCluster(primaries=0), InvalidArgument),
]


@pytest.mark.parametrize(("what", "call", "kind"), MISUSES, ids=[m[0] for m in MISUSES])
def test_each_misuse_raises_echomqs_type(what: str, call: Callable[[], Any],
                                          kind: type[Exception]) -> None:
    with pytest.raises(kind) as caught:
        call()
    assert isinstance(caught.value, ValueError)  # what callers caught before still catches it


def test_no_module_raises_a_bare_value_error() -> None:
    hits = [f"{p.relative_to(SRC)}:{n}" for p in sorted(SRC.rglob("*.py"))
            for n, line in enumerate(p.read_text().splitlines(), 1)
            if re.search(r"\braise ValueError\b", line)]
    assert not hits, hits
