"""The game's consumers in their own process, for the chaos run to kill -9 and restart.

    python -m codemojex.chaos.game_proc VALKEY_URL POSTGRES_URL READY_FILE

``VALKEY_URL`` is one server or a cluster (``redis+cluster://…``).

Runs the game's supervision tree (:class:`codemojex.game.app.App`: score, settle, notify,
relay, cache) until SIGTERM, then stops it cleanly. It writes its pid to
``READY_FILE`` once the tree is started.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from codemojex.game.app import App
from codemojex.infra.pg import open_pool
from codemojex.service import Services
from codemojex.wallet.migrate import GAME_ROLE
from echomq import connect_async

__all__ = ["main"]


async def run(valkey_url: str, pg_url: str, ready: Path) -> None:
    pool = await open_pool(pg_url, min_size=2, max_size=8, role=GAME_ROLE)  # the game's privileges
    connector = connect_async(valkey_url, retry_budget_s=30)  # one server or a cluster
    try:
        app = App(Services(pool, connector))
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, app.stop)
        tree = asyncio.create_task(app.run())
        await asyncio.to_thread(ready.write_text, str(os.getpid()))
        await tree
    finally:
        await connector.aclose()
        await pool.close()


def main() -> None:
    valkey_url, pg_url, ready = sys.argv[1:4]
    asyncio.run(run(valkey_url, pg_url, Path(ready)))


if __name__ == "__main__":
    main()
