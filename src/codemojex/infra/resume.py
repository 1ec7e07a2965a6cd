"""A resume finishes the run in flight on the servers that run used (issue 25, item 4).

``codemojex play`` records in its data directory's state, before the first round
opens, where the game runs (``where``): ``embedded`` for a server it starts itself,
else the URL named by ``ECHOMQ_URL`` / ``CODEMOJEX_DATABASE_URL`` (its password left
out). A later ``play`` in that directory resumes the game only against the same
servers: :func:`check_same_servers` refuses any other in one line that says which
(the game's rounds exist only where it ran), before any server starts. A resume also
says which of the options given on its command line differ from the game's own
(:func:`differences`): the game in flight keeps its options.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from codemojex.domain.errors import ConfigurationError
from codemojex.infra.pg import ENV_URL

__all__ = ["check_same_servers", "differences", "redacted", "servers_in_use"]

# The play options as the command line names them, and as the game record does.
_RECORD = {"players": "players", "guesses": "guesses", "rounds": "rounds", "round_seconds": "round_s",
           "price": "price"}


def redacted(url: str) -> str:
    """``url`` without its password (a URL or a key=value conninfo)."""
    if "://" not in url:
        return " ".join(part for part in url.split() if not part.startswith("password="))
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user, _, hosts = parts.netloc.rpartition("@")
    name = user.split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{name}@{hosts}" if name else hosts))


def servers_in_use(*, cluster: bool, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Where this run's servers are: ``embedded`` (``embedded cluster``) or a redacted URL."""
    env = os.environ if env is None else env
    valkey = env.get("ECHOMQ_URL") or ""
    pg = env.get(ENV_URL) or ""
    return {"valkey": redacted(valkey) if valkey else ("embedded cluster" if cluster else "embedded"),
            "postgres": redacted(pg) if pg else "embedded"}


def check_same_servers(recorded: object, now: dict[str, str]) -> None:
    """Raise :class:`ConfigurationError` (one line) unless ``now`` names the servers the game
    in flight ran on. A state written before servers were recorded is not checked."""
    if not isinstance(recorded, dict):
        return
    wrong = [k for k in ("valkey", "postgres") if k in recorded and recorded[k] != now[k]]
    if not wrong:
        return
    ran = ", ".join(f"{'Valkey' if k == 'valkey' else 'PostgreSQL'} {recorded[k]}" for k in wrong)
    would = ", ".join(f"{'Valkey' if k == 'valkey' else 'PostgreSQL'} {now[k]}" for k in wrong)
    how = "; ".join(f"{'ECHOMQ_URL' if k == 'valkey' else ENV_URL}="
                    f"{'(unset)' if str(recorded[k]).startswith('embedded') else recorded[k]}"
                    for k in wrong)
    raise ConfigurationError(f"the game in flight ran on {ran}, this run would use {would}: "
                             f"resume it on its own servers ({how})")


def differences(given: Mapping[str, object], game: Mapping[str, Any],
                topology: Mapping[str, Any]) -> list[str]:
    """One note per option given on the command line that differs from the game in flight's."""
    options = game.get("options") or {}
    notes = []
    for flag, value in given.items():
        if flag in _RECORD:
            had = options.get(_RECORD[flag])
        elif flag == "score_shards":
            had = topology.get("score_shards")
        else:
            continue  # --cluster: refused before this when it differs
        if had is not None and had != value:
            notes.append(f"--{flag.replace('_', '-')} {value} given, the game has {had}")
    return notes
